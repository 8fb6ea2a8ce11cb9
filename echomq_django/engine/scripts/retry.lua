-- retry: the lease holder reports a failed attempt.
--
-- The error is appended to the row. Past max_attempts (attempts minus refunds),
-- or when ARGV[6] says give up (a row the worker refuses to run), the job goes
-- to dead; otherwise to scheduled after the backoff, or straight to pending.
-- A job an operator cancelled while it ran goes to dead as Cancelled, whatever the
-- caller asks: its worker may end it before it heard of the cancel.
--
-- KEYS[1] active  ZSET   KEYS[2] pending  ZSET   KEYS[3] scheduled  ZSET
-- KEYS[4] dead    ZSET   KEYS[5] seq      STRING KEYS[6] metrics    HASH
-- KEYS[7] wake    ZSET   KEYS[8] job      HASH
--
-- ARGV[1] job id   ARGV[2] token   ARGV[3] error (a JSON object, opaque)
-- ARGV[4] one-line summary   ARGV[5] backoff_ms   ARGV[6] give up (1/0)
-- ARGV[7] µs since the run began (-1: stamped already; see stamp_run)
--
-- Reply: {state, due_ms} with state 'dead', 'scheduled' or 'pending', or 'cancelled'
-- (dead, by an operator's cancel). The same call again (its reply was lost) answers the
-- same and changes nothing, until the job moves on (see `ended`).
-- Error: EMQSTALE when the caller no longer holds the lease; nothing is changed.
-- @include "limits"
-- @include "endings"
local id, jk = ARGV[1], KEYS[8]
local token = ARGV[2]
local stale, row = fence(jk, token, 'retry', 'limits', 'cancel')
if stale then return ended_before(jk, token, 'retry') or stale end

redis.call('ZREM', KEYS[1], id)  -- first: see complete.lua (a full server)
gates_free(id, row[3])
stamp_run(jk, token, ARGV[7])
append_error(jk, ARGV[3], ARGV[4], now_us)
if row[4] and row[4] ~= '' then
  to_dead_cancelled(jk, id, row[4], KEYS[4], KEYS[6], ARGV[3])
  return ended(jk, token, 'retry', 'cancelled', now_ms)
end
local used, max = used_attempts(jk)
if ARGV[6] == '1' or used >= max then
  to_dead(jk, id, KEYS[4], KEYS[6])
  return ended(jk, token, 'retry', 'dead', now_ms)
end

bump(KEYS[6], 'retried')
count_minute('failed')
local backoff = tonumber(ARGV[5]) or 0
if backoff > 0 then
  local due = now_ms + backoff
  redis.call('ZADD', KEYS[3], fmt(due), id)
  redis.call('HSET', jk, 'state', 'scheduled', 'due_ms', fmt(due))
  redis.call('HDEL', jk, 'worker', 'lease_deadline')
  wake(KEYS[7])
  return ended(jk, token, 'retry', 'scheduled', due)
end
to_pending(jk, id, KEYS[2], KEYS[5], true)
wake(KEYS[7])
return ended(jk, token, 'retry', 'pending', now_ms)
