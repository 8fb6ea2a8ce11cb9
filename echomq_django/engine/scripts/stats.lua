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
-- The counters are best-effort (common.lua's bump): a key of another type planted at
-- the metrics' name reads as no counters, so the counts still show.
local metrics = redis.pcall('HGETALL', KEYS[6])
if metrics.err then metrics = {} end
reply[#reply + 1] = metrics
return reply
