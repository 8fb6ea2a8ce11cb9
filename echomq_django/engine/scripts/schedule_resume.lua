-- schedule_resume: a paused schedule fires again, from its first tick after now.
--
-- KEYS[1] schedules  ZSET   KEYS[2] schedule  HASH (its record)
-- ARGV[1] name, ARGV[2] its next fire time (ms: the first tick after now and its last tick)
--
-- The ticks that passed while it was paused are neither fired nor counted as missed.
-- Reply: 1. Error: EMQNOTFOUND, EMQSTATE (not paused, or orphaned).
-- @include "schedule"
local name = ARGV[1]
local paused, refused = schedule_paused(KEYS[2], name)
if refused then return refused end
if not paused then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is not paused')
end
redis.call('HSET', KEYS[2], 'paused', 0)
redis.call('HDEL', KEYS[2], 'paused_at')
redis.call('ZADD', KEYS[1], ARGV[2], name)
return 1
