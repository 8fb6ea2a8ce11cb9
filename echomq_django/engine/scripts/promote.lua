-- promote: due scheduled jobs into pending (the reaper's sweep; claim does the
-- same for its own queue before it pops). Bounded by ARGV[1] per call.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq  STRING
-- KEYS[4] wake     ZSET
-- ARGV[1] limit
--
-- Reply: {promoted, more (1/0)}
-- @include "limits"
local limit = tonumber(ARGV[1])
local promoted = promote_due(KEYS[2], KEYS[1], KEYS[3], limit)
-- A gate that may admit again wakes a worker too (its alarm at the gate's time).
local gate = gates_next()
if promoted > 0 or (gate and gate <= now_ms) then
  wake(KEYS[4])
end
local more = 0
if promoted == limit and redis.call('ZCOUNT', KEYS[2], '-inf', fmt(now_ms)) > 0 then
  more = 1
end
return {promoted, more}
