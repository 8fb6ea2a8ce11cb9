-- schedule_list: every schedule of one queue with its record (read-only).
--
-- KEYS[1] schedules  ZSET   name -> next fire ms (+inf: paused or orphaned)
-- ARGV[1] limit: schedules returned at most
--
-- Reply: {now_ms, name_1, next_1, fields_1, ...} in order of next fire time; fields as a
-- flat HGETALL ({} for a key of another type).
-- @include "clock"
local reply = {now_ms}
local names = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #names, 2 do
  local fields = redis.pcall('HGETALL', base .. 'schedule:' .. names[i])
  if fields.err then
    fields = {}
  end
  reply[#reply + 1] = names[i]
  reply[#reply + 1] = names[i + 1]
  reply[#reply + 1] = fields
end
return reply
