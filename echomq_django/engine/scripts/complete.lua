-- complete: the lease holder retires its job with a result.
--
-- KEYS[1] active  ZSET   KEYS[2] completed  ZSET   KEYS[3] metrics  HASH
-- KEYS[4] job row HASH
--
-- ARGV[1] job id   ARGV[2] token (the attempts value the claim returned)
-- ARGV[3] result (opaque string)
--
-- Reply: finished_at (server µs). Error: EMQSTALE when the caller no longer holds
-- the lease (reaped, re-claimed, finished or removed); nothing is changed then.
-- The row is kept until finished + result_ttl_ms: that is its score in completed.
-- @include "common"
-- @include "moves"

local id, jk = ARGV[1], KEYS[4]
local stale = fence(jk, ARGV[2], 'complete')
if stale then return stale end

local ttl = tonumber(redis.call('HGET', jk, 'result_ttl_ms')) or 86400000
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], fmt(now_ms + ttl), id)
redis.call('HSET', jk, 'state', 'completed', 'finished_at', fmt(now_us), 'result', ARGV[3])
redis.call('HDEL', jk, 'worker', 'lease_deadline')
release_idempotency(jk, id)
redis.call('HINCRBY', KEYS[3], 'completed', 1)
count_minute('completed')
return fmt(now_us)
