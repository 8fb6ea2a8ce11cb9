-- schedule_due: the due schedules of one queue, read on the server's clock (read-only).
--
-- KEYS[1] schedules  ZSET   name -> next fire ms (+inf: paused or orphaned)
-- ARGV[1] limit: due schedules returned at most
--
-- Reply: {now_ms, next_ms, name_1, next_1, fields_1, name_2, ...}: next_ms is the earliest
-- fire time still ahead ('' when none), then each due schedule's name, its next fire time
-- (the fence fire.lua checks) and its hash as a flat HGETALL ({} for a key of another type).
-- @include "clock"
local reply = {now_ms, ''}
local ahead = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now_ms), '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if ahead[2] then
  reply[2] = ahead[2]
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now_ms), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #due, 2 do
  local fields = redis.pcall('HGETALL', base .. 'schedule:' .. due[i])
  if fields.err then
    fields = {}
  end
  reply[#reply + 1] = due[i]
  reply[#reply + 1] = due[i + 1]
  reply[#reply + 1] = fields
end
return reply
