-- schedule_pause: an operator stops a schedule from firing until it is resumed.
--
-- KEYS[1] schedules  ZSET   KEYS[2] schedule  HASH (its record)
-- ARGV[1] name
--
-- Reply: 1. Error: EMQNOTFOUND (no such schedule), EMQSTATE (paused already, or orphaned).
-- @include "clock"
-- @include "schedule"
local name = ARGV[1]
local paused, refused = schedule_paused(KEYS[2], name)
if refused then return refused end
if paused then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is paused already')
end
redis.call('HSET', KEYS[2], 'paused', 1, 'paused_at', fmt(now_us))
redis.call('ZADD', KEYS[1], '+inf', name)
return 1
