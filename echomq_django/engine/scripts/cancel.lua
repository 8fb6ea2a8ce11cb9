-- cancel: an operator stops a job: at once if it waits, on its worker if it runs.
--
-- A pending or scheduled job goes to dead with a Cancelled error (so it stays
-- visible and can be retried); the metric 'cancelled' counts it. An active job is
-- flagged ('cancel' = the reason) and stays active: its worker's next lease renewal
-- (at least every second while it runs) is refused with EMQCANCEL, and the worker
-- stops the task (raises Cancelled in it; kills its child if it does not end) and
-- sends it to dead. If the worker is gone, the reaper sends it to dead instead.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] dead  ZSET
-- KEYS[4] metrics  HASH   KEYS[5] job        HASH
-- ARGV[1] job id   ARGV[2] reason (one line, no quotes or backslashes)
--
-- Reply: 'dead', or 'cancelling' for a running job.
-- Error: EMQNOTFOUND (no row), EMQSTATE (finished already).
-- @include "limits"
local id, jk = ARGV[1], KEYS[5]
local bad = foreign(jk, 'hash')
if bad then return bad end
local state = redis.call('HGET', jk, 'state')
if not state then return redis.error_reply('EMQNOTFOUND job ' .. id) end
if state ~= 'pending' and state ~= 'scheduled' and state ~= 'active' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. state .. ', not pending, scheduled or active')
end
if state == 'active' then
  redis.call('HSET', jk, 'cancel', ARGV[2])
  return 'cancelling'
end
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
gate_unhold(jk, id)
to_dead_cancelled(jk, id, ARGV[2], KEYS[3], KEYS[4])
return 'dead'
