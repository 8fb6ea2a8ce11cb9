-- A lease's own ending, remembered, inlined by `-- @include "endings"` (retry, crashed).
-- @include "common"

-- A lease's ending (retry, crashed) is kept in its row ('ended': token, op, the state
-- and number it answered), so that the same call sent again after its reply was lost
-- answers what it did, instead of "stale". `ended` records it and returns that answer;
-- `ended_before` finds it, or nil: a move by anyone else (the reaper, an operator, a
-- new claim: a new token) leaves the caller stale (every other move forgets 'ended':
-- moves.lua). `ended` runs after its script's own move.
local function ended(jk, token, op, state, n)
  redis.call('HSET', jk, 'ended', token .. ' ' .. op .. ' ' .. state .. ' ' .. fmt(n))
  return {state, n}
end

local function ended_before(jk, token, op)
  local was = redis.pcall('HMGET', jk, 'state', 'attempts', 'ended')
  if was.err or was[2] ~= token or type(was[3]) ~= 'string' then return nil end
  local t, o, state, n = string.match(was[3], '^(%d+) (%a+) (%a+) (%-?%d+)$')
  local now_state = state == 'cancelled' and 'dead' or state
  if t == token and o == op and now_state == was[1] then
    return {state, int_in(n, 0, 2^53, 0)}
  end
end
