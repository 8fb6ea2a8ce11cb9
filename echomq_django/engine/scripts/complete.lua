-- complete: lease holders retire their jobs with results, one or many per call.
--
-- KEYS[1] active  ZSET   KEYS[2] completed  ZSET   KEYS[3] metrics  HASH
-- KEYS[3 + i] job i's row HASH (i = 1..n, all of this queue)
--
-- ARGV[3i - 2] job i's id   ARGV[3i - 1] its token (the attempts value the claim
-- returned)   ARGV[3i] its result (opaque string)
--
-- Reply: one entry per job, in order: finished_at (server µs), or an EMQSTALE
-- error when the caller no longer holds that lease (reaped, re-claimed, finished
-- or removed); that job is left unchanged, the others complete. Each job's move is
-- the same as alone; batching shares the clock, the counters and the round trip
-- (a worker flushes the completions of its short jobs together).
-- The row is kept until finished + result_ttl_ms: that is its score in completed.
-- @include "common"
-- @include "moves"

local reply, done = {}, 0
for i = 1, #KEYS - 3 do
  local jk, id = KEYS[3 + i], ARGV[3 * i - 2]
  local stale, row = fence(jk, ARGV[3 * i - 1], 'complete', 'result_ttl_ms', 'idem')
  if stale then
    reply[i] = stale
  else
    local ttl = tonumber(row[3]) or 86400000
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], fmt(now_ms + ttl), id)
    redis.call('HSET', jk, 'state', 'completed', 'finished_at', fmt(now_us), 'result', ARGV[3 * i])
    redis.call('HDEL', jk, 'worker', 'lease_deadline')
    release_idempotency(jk, id, row[4] or '')
    reply[i] = fmt(now_us)
    done = done + 1
  end
end
if done > 0 then
  redis.call('HINCRBY', KEYS[3], 'completed', done)
  count_minute('completed', done)
end
return reply
