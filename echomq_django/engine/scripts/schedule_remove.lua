-- schedule_remove: an operator deletes an orphaned schedule's record for good.
--
-- KEYS[1] schedules  ZSET   KEYS[2] schedule  HASH (its record)
-- ARGV[1] name
--
-- Only an orphaned schedule (no longer declared in code) can be removed: a declared one
-- would be stored again by the next scheduler to start. The jobs it fired are kept.
-- Reply: 1. Error: EMQNOTFOUND, EMQSTATE (still declared).
-- @include "common"
local name = ARGV[1]
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind == 'none' and not redis.call('ZSCORE', KEYS[1], name) then
  return redis.error_reply('EMQNOTFOUND schedule ' .. name)
end
if kind == 'hash' and redis.call('HGET', KEYS[2], 'orphaned') ~= '1' then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is declared in code: it cannot be removed')
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], name)
return 1
