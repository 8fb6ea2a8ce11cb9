-- page (read only): one page of a place's sorted set with the listed row fields.
--
-- ZRANGE with offsets, never the whole set: a page costs the same with a
-- million members.
--
-- KEYS[1] state_set  ZSET (the place: pending, scheduled, active, completed or dead)
-- ARGV[1] offset   ARGV[2] count (at most 500)   ARGV[3] newest first (1/0)
-- ARGV[4..] row fields to return
--
-- Reply: {total, {id, score, field values...}...}; a missing row (or a key of
-- another type in its place) gives nils.
-- @include "common"
local offset, count = tonumber(ARGV[1]), math.min(tonumber(ARGV[2]), ${PAGE_MAX})
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
local members
if ARGV[3] == '1' then
  members = redis.call('ZRANGE', KEYS[1], offset, offset + count - 1, 'REV', 'WITHSCORES')
else
  members = redis.call('ZRANGE', KEYS[1], offset, offset + count - 1, 'WITHSCORES')
end
local reply = {redis.call('ZCARD', KEYS[1])}
for i = 1, #members, 2 do
  local entry = {members[i], members[i + 1]}
  if #fields > 0 then
    local jk, values = row_key(members[i]), {}
    if is_row(jk) then values = redis.call('HMGET', jk, unpack(fields)) end
    for j = 1, #fields do entry[#entry + 1] = values[j] or false end
  end
  reply[#reply + 1] = entry
end
return reply
