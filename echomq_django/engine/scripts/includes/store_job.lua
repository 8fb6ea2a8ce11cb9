-- A new job's row, inlined by `-- @include "store_job"`: the one
-- place that writes what enqueue stores, so a job fired by a schedule (fire,
-- schedule_run_now) is the same row as one enqueued by a caller.
--
-- `seq`: the job's sequence number (the caller took it with INCRBY); `due`: absolute
-- Unix ms, 0 or past for now; `digest`: the idempotency key's digest ('' for none);
-- `timeout_ms`: the job's own time limit (nil or 0: none); `limits`: its flow-control
-- gates (includes/limits.lua; nil or '': none).
-- The caller checked that no row exists at `jk`, and counts and wakes once per call.
-- Returns the state the job is stored in: 'pending' or 'scheduled'.
-- @include "clock"

-- A new job's gates are the rule from now on (includes/limits.lua reads a gate's rule
-- here, not from the rows: a deploy that changes a cap or a rate changes it for the
-- jobs already waiting too). A keyed gate ('#': one per concurrency_key) keeps each
-- row's own: there are as many as keys, and none has an entry here; its task's family
-- ('conc:<task>#*', see unhold.lua) has one, the last enqueued cap, for the admin and
-- stats. A changed rule reopens its gate's line of held jobs (their next time was
-- reckoned under the old rule: an hour away for a 1/h rate raised to 100/s), so the
-- next claim reckons it again. pcall: a key of another type there loses the
-- announcement, never the job. Once per rule per call.
local announced = {}
local function announce_gates(limits)
  if not limits or limits == '' then return end
  for spec in string.gmatch(limits, '%S+') do
    local name = string.match(spec, '^([^/#]+)/')
    if not name then  -- a keyed cap: its family's rule
      local family, cap = string.match(spec, '^(conc:[^/#]*)#[^/]*/(%d+)$')
      if family then
        name = family .. '#*'
        spec = name .. '/' .. cap
      end
    end
    if name and not announced[spec] then
      announced[spec] = true
      if redis.pcall('HGET', base .. 'limits', name) ~= spec then
        redis.pcall('HSET', base .. 'limits', name, spec)
        redis.pcall('ZADD', base .. 'gates', 'XX', fmt(now_ms), name)
      end
    end
  end
end

local function store_job(jk, id, seq, pending_key, scheduled_key, payload, task, priority,
                         max_attempts, lease_ms, due, run_after, result_ttl_ms, dead_ttl_ms, digest,
                         timeout_ms, limits)
  local state, place, at = 'pending', 'seq', seq
  local floor = fmt(token_floor())  -- see common.lua: no token of a removed row again
  if due > now_ms then
    state, place, at = 'scheduled', 'due_ms', due
    redis.call('ZADD', scheduled_key, fmt(due), id)
  else
    redis.call('ZADD', pending_key, fmt(pending_score(priority, seq)), id)
  end
  redis.call('HSET', jk,
    'id', id, 'payload', payload, 'task', task, 'priority', priority,
    'attempts', floor, 'refunds', floor, 'max_attempts', max_attempts, 'lease_ms', lease_ms,
    'enqueued_at', fmt(now_us), 'run_after', run_after,
    'result_ttl_ms', result_ttl_ms, 'dead_ttl_ms', dead_ttl_ms, 'idem', digest,
    'timeout_ms', timeout_ms or '0', 'state', state, place, fmt(at))
  if limits and limits ~= '' then  -- only a limited job's row has the field
    redis.call('HSET', jk, 'limits', limits)
    announce_gates(limits)
  end
  return state
end
