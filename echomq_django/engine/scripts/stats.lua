-- stats (read only): the size of each place and the queue's counters, in one
-- consistent snapshot.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] active  ZSET
-- KEYS[4] completed  ZSET   KEYS[5] dead  ZSET   KEYS[6] metrics  HASH
--
-- Reply: {now_ms, pending, scheduled, active, completed, dead, metrics as a flat HGETALL}
-- @include "clock"
local reply = {now_ms}
for i = 1, 5 do
  reply[#reply + 1] = redis.call('ZCARD', KEYS[i])
end
reply[#reply + 1] = redis.call('HGETALL', KEYS[6])
return reply
