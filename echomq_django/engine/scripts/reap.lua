-- reap: expired leases back to pending, or to dead past the crash budget.
--
-- A lease past its deadline (server clock) means the worker died or stalled. What
-- that costs the job depends on what the server knows of its run (per-job
-- accounting: a job pays only for its own faults):
--
-- * not started in this lease (`run` is not the lease's token: it waited in the
--   worker's read-ahead, or the claim's reply was lost): back to its old place,
--   free: the attempt is refunded.
-- * left by its worker (`left` is the lease's token: a stop whose grace ran out
--   while it ran in a thread, leave.lua): back free, not solo.
-- * started, not `solo`: it may have crashed its worker, or run beside the job
--   that did. Back free, but `solo`: it is claimed alone and run alone from now on,
--   so the next crash is its own.
-- * started and `solo`: it ran alone and its worker died. That is a crash it
--   caused: `crashes` + 1 and a WorkerCrashed error; dead once crashes reach the
--   budget (ARGV[2]), else back, still solo.
-- * started in a child process (`isolated` is the lease's token): the lease was
--   lost because the worker itself died (a task can only kill its child, and the
--   worker reports that itself: crashed.lua). Back free, and solo: its own child.
--   A SIGKILL of a worker is not charged to a job that ran in a child, up to the
--   crash budget's number of times (`lost_isolated` counts them): a job whose worker
--   keeps dying while it runs (an OOM kill that picks the supervisor, a child that
--   starves its host) is charged a crash for each loss after that, and ends dead.
--
-- * cancelled by an operator while it ran (`cancel` holds the reason): to dead.
--
-- A crash re-delivery is never one of the job's max_attempts (those count the runs
-- whose task raised or timed out): every reaped attempt is refunded.
-- Bounded: at most ARGV[1] jobs per call; the caller loops while `more` is 1.
--
-- KEYS[1] active  ZSET   KEYS[2] pending  ZSET   KEYS[3] dead  ZSET
-- KEYS[4] seq     STRING KEYS[5] metrics  HASH   KEYS[6] wake  ZSET
-- ARGV[1] limit   ARGV[2] crash budget (crashes that send a job to dead, >= 1)
--
-- Reply: {returned to pending, moved to dead, dangling ids dropped, more (1/0), the ids
-- moved to dead (their worker is gone: runreaper sends their task_finished)}
-- A dangling id (no row, a key of another type, a row not active) is only
-- dropped from active: no command can fail on it after the batch's first moves.
-- @include "limits"
local limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now_ms), 'LIMIT', 0, limit)
local returned, dead, dangling, unstarted = 0, 0, 0, 0
local dead_ids = {}
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  local jk = row_key(id)
  local row = {}
  if is_row(jk) then
    row = redis.call('HMGET', jk, 'state', 'worker', 'attempts', 'run', 'solo', 'refunds',
      'crashes', 'isolated', 'cancel', 'limits', 'lost_isolated', 'left')
  end
  if row[1] ~= 'active' then
    dangling = dangling + 1
  else
    gates_free(id, row[10])
    -- Counters are read, not HINCRBY'd: a corrupt one (not an integer) must not fail the
    -- script after this batch's first moves. It reads as 0.
    redis.call('HSET', jk, 'refunds', fmt(int_in(row[6], 0, 2^53, 0) + 1))
    local to, why = 'pending', nil
    local cancelled = row[9] and row[9] ~= ''
    if cancelled then  -- cancelled while it ran, and its worker is gone
      to_dead_cancelled(jk, id, row[9], KEYS[3], KEYS[5])
      to = 'dead'
    elseif row[4] ~= row[3] then
      unstarted = unstarted + 1
    elseif row[12] == row[3] then  -- left at a stop, still running in its thread: free
    elseif row[8] == row[3] then  -- it ran in a child: its worker died, not (yet) it
      local lost = int_in(row[11], 0, 2^53, 0) + 1
      redis.call('HSET', jk, 'solo', '1', 'lost_isolated', fmt(lost))
      if lost > budget then
        why = ' lost its lease while this job ran in its child, ' .. fmt(lost) .. ' times'
      end
    elseif row[5] ~= '1' then
      redis.call('HSET', jk, 'solo', '1')
    else
      why = ' stopped renewing its lease while this job ran alone on it'
    end
    if why then  -- a crash the job is charged with
      local crashes = int_in(row[7], 0, 2^53, 0) + 1
      redis.call('HSET', jk, 'crashes', fmt(crashes))
      local holder = row[2] or '?'
      append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.WorkerCrashed",'
        .. '"traceback":"WorkerCrashed: worker ' .. holder .. why
        .. ' (crash ' .. fmt(crashes) .. ' of ' .. fmt(budget) .. ')"}',
        'WorkerCrashed: worker ' .. holder .. ' died running it (' .. fmt(crashes) .. '/' .. fmt(budget) .. ')', now_us)
      if crashes >= budget then
        to_dead(jk, id, KEYS[3], KEYS[5])
        to = 'dead'
      end
    end
    if to == 'dead' then
      dead = dead + 1
      dead_ids[dead] = id
    else
      to_pending(jk, id, KEYS[2], KEYS[4], false)
      returned = returned + 1
    end
  end
end
if returned > 0 then
  bump(KEYS[5], 'reaped', returned)
  wake(KEYS[6])
end
if unstarted > 0 then
  bump(KEYS[5], 'reaped_unstarted', unstarted)
end
if dead > 0 then
  bump(KEYS[5], 'reaped_dead', dead)
end
local more = 0
if #expired == limit and redis.call('ZCOUNT', KEYS[1], '-inf', fmt(now_ms)) > 0 then
  more = 1
end
return {returned, dead, dangling, more, dead_ids}
