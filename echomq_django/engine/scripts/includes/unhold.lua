-- Out of a gate's line, inlined by `-- @include "unhold"` (limits brings it; enqueue
-- takes it alone, for debounce, without the rest of flow control: every line a script
-- inlines runs at each of its calls).
-- @include "common"

-- A keyed cap ('conc:<task>#<key digest>', one per concurrency_key value) is counted in
-- its task's aggregate too, named by its family, 'conc:<task>#*' (engine/limits.py
-- refuses '#*' in a gate's own name), so a read of the queue's limits costs the same
-- whatever the number of keys:
--   emq:{q}:gate:<family>  ZSET, the leased ids of all its keys, by lease deadline
--   emq:{q}:held:<family>  ZSET, the jobs waiting on any of its keys (pending score)
--   emq:{q}:keys:<family>  HASH, key digest -> its cap's spec, while the key holds a slot
-- Returns the family and the key's digest, or nil for a gate that is not keyed.
local function gate_family(name)
  local task, digest = string.match(name, '^(conc:[^#]*)#(.*)$')
  if task then return task .. '#*', digest end
end

-- A pending job leaves its place other than by a claim (cancel, delete, debounce):
-- out of its gate's line too (and of its task's aggregate line, for a keyed cap).
local function gate_unhold(jk, id)
  local name = redis.call('HGET', jk, 'held')
  if name and name ~= '' then
    redis.pcall('ZREM', base .. 'held:' .. name, id)  -- a line of another type: not in it
    local family = gate_family(name)
    if family then redis.pcall('ZREM', base .. 'held:' .. family, id) end
    redis.call('HDEL', jk, 'held')
  end
end
