#!lua flags=allow-oom
-- extend: the lease holder renews its lease to now + lease_ms (server clock).
--
-- KEYS[1] active  ZSET   KEYS[2] job      HASH
-- ARGV[1] job id   ARGV[2] token   ARGV[3] lease_ms
-- ARGV[4] µs since the run began, for a job whose run is not stamped yet (-1: none)
--
-- Reply: the new deadline (Unix ms). Error: EMQSTALE when the lease was lost;
-- the worker must then not complete the job over the new holder. A lease that ran
-- out is lost too when a claim gave its concurrency slot to another job and the cap
-- is still full (renewed, it would run over the cap; with room, it takes its slot
-- again: includes/limits.lua, gates_lost). EMQCANCEL (the reason follows) when an
-- operator cancelled the running job: not renewed; the worker stops the task and
-- reports it dead (see cancel.lua).
--
-- allow-oom (the shebang above): a server at maxmemory with noeviction refuses
-- a flagless script whose first write may grow memory, and ZADD XX is such a
-- write, so heartbeats failed under OOM while claim/complete/retry (first write
-- a ZREM) went on: leases of long jobs expired and the jobs ran twice. Extend
-- only overwrites a score and a field of the same size: it never grows memory (but
-- for a slot a claim dropped, taken again: one member back in its gate).
-- @include "limits"
local id, jk = ARGV[1], KEYS[2]
local stale, row = fence(jk, ARGV[2], 'extend', 'cancel', 'limits', 'lease_deadline')
if stale then return stale end
if row[3] and row[3] ~= '' then  -- an operator cancelled it: the holder must stop it
  return redis.error_reply('EMQCANCEL ' .. row[3])
end
-- A lease that ran out and whose concurrency slot a claim gave away: taken again if
-- the cap has room, else refused as lost (includes/limits.lua, gates_lost).
local lost
stale, lost = gates_lost(id, row[4], row[5])
if stale then return stale end

local deadline = now_ms + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', fmt(deadline), id)
redis.call('HSET', jk, 'lease_deadline', fmt(deadline))
gates_extend(id, row[4], deadline, lost)
stamp_run(jk, ARGV[2], ARGV[4])
return deadline
