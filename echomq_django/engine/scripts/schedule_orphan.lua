-- schedule_orphan: a schedule no longer declared in code stops firing (a scheduler's start).
--
-- KEYS[1] schedules  ZSET   KEYS[2] schedule  HASH (its record)
-- ARGV[1] name
--
-- Reply: 1 (now orphaned: never due, its record kept and shown until an operator removes
-- it, or restored if code declares it again), 0 (already orphaned, or gone).
-- @include "common"
local name = ARGV[1]
if not is_row(KEYS[2]) or redis.call('HGET', KEYS[2], 'orphaned') == '1' then
  return 0
end
redis.call('HSET', KEYS[2], 'orphaned', 1)
redis.call('ZADD', KEYS[1], '+inf', name)
return 1
