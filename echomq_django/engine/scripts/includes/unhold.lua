-- Out of a gate's line, inlined by `-- @include "unhold"` (limits brings it; enqueue
-- takes it alone, for debounce, without the rest of flow control: every line a script
-- inlines runs at each of its calls).
-- @include "common"

-- A pending job leaves its place other than by a claim (cancel, delete, debounce):
-- out of its gate's line too.
local function gate_unhold(jk, id)
  local name = redis.call('HGET', jk, 'held')
  if name and name ~= '' then
    redis.pcall('ZREM', base .. 'held:' .. name, id)  -- a line of another type: not in it
    redis.call('HDEL', jk, 'held')
  end
end
