-- crashed: the lease holder saw its job's process die while the job ran alone in it.
--
-- The worker ran the job in a child process with nothing beside it, and the child
-- died (a segfault, an OOM kill, os._exit): the crash is the job's own, without
-- waiting for the lease to run out. `crashes` + 1 and a WorkerCrashed error; dead
-- once crashes reach the budget, else back to its old place, solo. Like every
-- crash re-delivery, it spends none of max_attempts (the attempt is refunded). A job an
-- operator cancelled while it ran goes to dead as Cancelled, not charged a crash.
--
-- KEYS[1] active  ZSET   KEYS[2] pending  ZSET   KEYS[3] dead  ZSET
-- KEYS[4] seq     STRING KEYS[5] metrics  HASH   KEYS[6] wake  ZSET
-- KEYS[7] job     HASH
-- ARGV[1] job id   ARGV[2] token   ARGV[3] crash budget (>= 1)
-- ARGV[4] how it died (one line, no quotes or backslashes)   ARGV[5] µs since its run began
--
-- Reply: {state, crashes} with state 'pending' or 'dead', or 'cancelled' (dead, by an
-- operator's cancel: not charged). The same call again (its reply was lost) answers the
-- same and changes nothing, until the job moves on (see `ended`).
-- Error: EMQSTALE when the caller no longer holds the lease; nothing is changed.
-- @include "limits"
-- @include "endings"
local id, jk, token, budget = ARGV[1], KEYS[7], ARGV[2], tonumber(ARGV[3])
local stale, row = fence(jk, token, 'crashed', 'refunds', 'crashes', 'worker', 'limits', 'cancel')
if stale then return ended_before(jk, token, 'crashed') or stale end

redis.call('ZREM', KEYS[1], id)
gates_free(id, row[6])
stamp_run(jk, token, ARGV[5])
local refunds, crashes = int_in(row[3], 0, 2^53, 0) + 1, int_in(row[4], 0, 2^53, 0)
if row[7] and row[7] ~= '' then
  redis.call('HSET', jk, 'refunds', fmt(refunds))
  to_dead_cancelled(jk, id, row[7], KEYS[3], KEYS[5])
  return ended(jk, token, 'crashed', 'cancelled', crashes)
end
crashes = crashes + 1
redis.call('HSET', jk, 'refunds', fmt(refunds), 'crashes', fmt(crashes), 'solo', '1')
local holder = row[5] or '?'
append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.WorkerCrashed",'
  .. '"traceback":"WorkerCrashed: on worker ' .. holder .. ', ' .. ARGV[4]
  .. ' (crash ' .. fmt(crashes) .. ' of ' .. fmt(budget) .. ')"}',
  'WorkerCrashed: ' .. ARGV[4] .. ' (' .. fmt(crashes) .. '/' .. fmt(budget) .. ')', now_us)
bump(KEYS[5], 'crashed')
if crashes >= budget then
  to_dead(jk, id, KEYS[3], KEYS[5])
  return ended(jk, token, 'crashed', 'dead', crashes)
end
to_pending(jk, id, KEYS[2], KEYS[4], false)
wake(KEYS[6])
return ended(jk, token, 'crashed', 'pending', crashes)
