-- A schedule's state for an operator's call on it, inlined by `-- @include "schedule"`.
-- @include "common"

-- Whether the schedule at `key` is paused; or, as the second value, the refusal of
-- any call on it: there is no such schedule, or it is orphaned (it never fires).
local function schedule_paused(key, name)
  if not is_row(key) then
    return nil, redis.error_reply('EMQNOTFOUND schedule ' .. name)
  end
  local row = redis.call('HMGET', key, 'paused', 'orphaned')
  if row[2] == '1' then
    return nil, redis.error_reply('EMQSTATE schedule ' .. name .. ' is orphaned: it does not fire')
  end
  return row[1] == '1', nil
end
