-- An operator's action on a whole finished set, inlined by `-- @include "bulk"` (purge,
-- retry_dead): it acts on the set as it was when the operator asked (bound.lua), never
-- on the jobs that finish while it runs.
-- @include "common"
--
-- The bound is the set's highest score and the server's clock at that moment. A member
-- is the action's when its score is at most that score and its row finished
-- ('finished_at') at or before that time. Jobs that die or complete later are newer,
-- also when their score is lower (a shorter retention) and also when they were in the
-- set before (a job this very action retried, failing again): they are left where they
-- are. So the operator's prompt and the result speak of the same jobs, the action
-- moves each job at most once, and it ends once it has read past the bound's highest
-- score: the jobs finishing meanwhile with the retention of those it has still to read
-- sort after them (their score is later), beyond the bound.
--
-- Each call reads `limit` members after a cursor: the last member the call before read,
-- with its score. A sorted set orders its members by score, then by name (bytewise):
-- the next call starts at the first member after the cursor in that order, whether
-- the cursor is still there (left: ZRANK) or not (acted on, or gone meanwhile: found
-- among the members of its score). So no member is read twice, and a job that finishes
-- meanwhile is read at most once, only when it sorts after the cursor (its score is at
-- most the bound's: a shorter retention than the jobs the action has still to read).

-- a sorts after b as a sorted set sorts names: bytewise (Lua's `<` follows the locale)
local function sorts_after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- The rank of the first member after the cursor (`after_id` '' : the first member).
local function rank_after(set_key, after_id, after_score)
  if after_id == '' then return 0 end
  local score = redis.call('ZSCORE', set_key, after_id)
  if score and tonumber(score) == tonumber(after_score) then
    return redis.call('ZRANK', set_key, after_id) + 1
  end
  -- Gone (or back with another score): among the members of its score, sorted by name,
  -- the first that sorts after it. A binary search: a few reads however many tie.
  local lo = redis.call('ZCOUNT', set_key, '-inf', '(' .. after_score)
  local hi = redis.call('ZCOUNT', set_key, '-inf', after_score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if sorts_after(redis.call('ZRANGE', set_key, mid, mid)[1], after_id) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- The next members to read, at most `limit` {id, score} pairs after the cursor, and
-- whether members within the bound remain after them.
local function bulk_batch(set_key, limit, max_score, after_id, after_score)
  local from = rank_after(set_key, after_id, after_score)
  local max = tonumber(max_score)
  local flat = redis.call('ZRANGE', set_key, from, from + limit, 'WITHSCORES')
  local batch = {}
  for i = 1, #flat, 2 do
    if tonumber(flat[i + 1]) > max then return batch, false end
    if #batch == limit then return batch, true end  -- one more read: is there a next call
    batch[#batch + 1] = {flat[i], flat[i + 1]}
  end
  return batch, false
end

-- The row finished after the bound's time (`until_us`), in `place`: not the action's.
-- A member that is no row of that place is not newer: the action drops it from the set.
local function newer(jk, place, until_us)
  if not is_row(jk) then return false end
  local row = redis.call('HMGET', jk, 'state', 'finished_at')
  return row[1] == place and int_in(row[2], 0, 2^53, 0) > tonumber(until_us)
end
