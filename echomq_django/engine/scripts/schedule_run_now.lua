-- schedule_run_now: an operator enqueues one job of a schedule at once.
--
-- KEYS[1] pending    ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq  STRING
-- KEYS[4] metrics    HASH   KEYS[5] wake       ZSET   KEYS[6] schedule  HASH (its record)
-- KEYS[7] job  HASH (the new job's row)
-- ARGV[1] name, ARGV[2] the new job's id
--
-- The job is the row enqueue stores (store_job), from the schedule's definition. It runs
-- whether the schedule is paused or its last job still runs (the operator asked), and
-- becomes the schedule's last job; the ticks and the next fire time are untouched.
-- Reply: {id, state}. Error: EMQNOTFOUND, EMQSTATE (orphaned, or not a whole definition),
-- EMQEXISTS (a row with this id exists).
-- @include "moves"
-- @include "schedule"
local name, id = ARGV[1], ARGV[2]
if not is_row(KEYS[6]) then
  return redis.error_reply('EMQNOTFOUND schedule ' .. name)
end
if redis.call('HGET', KEYS[6], 'orphaned') == '1' then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' is orphaned: it is no longer declared')
end
local template = schedule_template(KEYS[6])
if not template then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' has no whole definition')
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return redis.error_reply('EMQEXISTS job ' .. id .. ' exists already')
end
local seq, corrupt_seq = take_seq(KEYS[3], 1)
if corrupt_seq then return corrupt_seq end
local state = store_schedule_job(template, KEYS[7], id, seq + 1, KEYS[1], KEYS[2])
redis.call('HSET', KEYS[6], 'last_job', id)
wake(KEYS[5])
bump(KEYS[4], 'enqueued')
return {id, state}
