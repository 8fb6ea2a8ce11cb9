-- A schedule's state and its job template, inlined by `-- @include "schedule"`.
-- @include "store_job"

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

-- The job template of the schedule at `key` (schedules.py JOB_TEMPLATE: what every job
-- it fires stores), or nil when the record is not a whole definition. timeout_ms and
-- limits may be absent (a record synced before they were stored): none.
local function schedule_template(key)
  local t = redis.call('HMGET', key, 'payload', 'task', 'priority', 'max_attempts', 'lease_ms',
    'result_ttl_ms', 'dead_ttl_ms', 'timeout_ms', 'limits')
  for i = 1, 7 do
    if not t[i] then return nil end
  end
  return t
end

-- Store one job of a schedule: the row enqueue stores for the task (store_job), due now,
-- with no idempotency key (a schedule refuses one: its ticks are one job each already).
local function store_schedule_job(t, jk, id, seq, pending_key, scheduled_key)
  return store_job(jk, id, seq, pending_key, scheduled_key, t[1], t[2], t[3], t[4], t[5], 0, '',
    t[6], t[7], '', t[8], t[9])
end
