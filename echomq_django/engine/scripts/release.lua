-- release: the lease holder gives its job back to pending at once (shutdown).
--
-- The attempt is refunded (refunds + 1) so it does not count against
-- max_attempts; the token itself never goes down. The job keeps its place. A job an
-- operator cancelled while it ran goes to dead as Cancelled instead.
--
-- KEYS[1] active  ZSET   KEYS[2] pending  ZSET   KEYS[3] seq  STRING
-- KEYS[4] metrics HASH   KEYS[5] wake     ZSET   KEYS[6] job      HASH
-- KEYS[7] dead    ZSET
-- ARGV[1] job id   ARGV[2] token   ARGV[3] solo (1: it was running in a process that
--         died beside other jobs, so it runs alone from now on; see reap.lua)
-- ARGV[4] began (0: its run never began, it waited in the holder's read-ahead: the
--         run its claim recorded, and the worker id it added, are taken back)
--
-- Reply: 1, or 'cancelled' (dead, by an operator's cancel). Error: EMQSTALE when the caller no longer holds the lease.
-- @include "limits"
local id, jk = ARGV[1], KEYS[6]
local stale, row = fence(jk, ARGV[2], 'release', 'limits', 'refunds', 'cancel')
if stale then return stale end

redis.call('ZREM', KEYS[1], id)
gates_free(id, row[3])
-- Read, not HINCRBY'd (see reap.lua): a corrupt refunds reads as 0, never a failure
-- after the ZREM above.
redis.call('HSET', jk, 'refunds', fmt(int_in(row[4], 0, 2^53, 0) + 1))
if row[5] and row[5] ~= '' then
  to_dead_cancelled(jk, id, row[5], KEYS[7], KEYS[4])
  return 'cancelled'
end
if ARGV[3] == '1' then
  redis.call('HSET', jk, 'solo', '1')
end
if ARGV[4] == '0' then
  local run, workers = unpack(redis.call('HMGET', jk, 'run', 'worker_ids'))
  if run == ARGV[2] then  -- the claim marked this lease's run (see mark_started)
    local before = workers and string.match(workers, '^(.*)\n[^\n]*$') or ''
    redis.call('HSET', jk, 'run', '0', 'worker_ids', before, 'isolated', '0')
  end
end
to_pending(jk, id, KEYS[2], KEYS[3], false)
bump(KEYS[4], 'released')
wake(KEYS[5])
return 1
