-- schedule_pause: an operator stops a schedule from firing until it is resumed.
--
-- KEYS[1] schedules  ZSET   KEYS[2] the schedule's HASH
-- ARGV[1] name
--
-- Reply: 1. Error: EMQNOTFOUND (no such schedule), EMQSTATE (paused already, or orphaned).
-- @include "common"

local name = ARGV[1]
if not is_row(KEYS[2]) then
  return redis.error_reply('EMQNOTFOUND schedule ' .. name)
end
local row = redis.call('HMGET', KEYS[2], 'paused', 'orphaned')
if row[2] == '1' then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is orphaned: it does not fire')
end
if row[1] == '1' then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is paused already')
end
redis.call('HSET', KEYS[2], 'paused', 1, 'paused_at', fmt(now_us))
redis.call('ZADD', KEYS[1], '+inf', name)
return 1
