-- extend: the lease holder renews its lease to now + lease_ms (server clock).
--
-- KEYS[1] active  ZSET   KEYS[2] job row  HASH
-- ARGV[1] job id   ARGV[2] token   ARGV[3] lease_ms
--
-- Reply: the new deadline (Unix ms). Error: EMQSTALE when the lease was lost;
-- the worker must then not complete the job over the new holder.
-- @include "common"
-- @include "moves"

local id, jk = ARGV[1], KEYS[2]
local stale = fence(jk, ARGV[2], 'extend')
if stale then return stale end

local deadline = now_ms + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', fmt(deadline), id)
redis.call('HSET', jk, 'lease_deadline', fmt(deadline))
return deadline
