-- leave: the lease holder stops while the job's run goes on in a thread it cannot stop
-- (a thread-mode worker whose grace ran out).
--
-- The lease stays: nobody may start the job while that thread may still run (it ends
-- with its process, a moment later). When the lease runs out, the reaper returns the
-- job free and not solo, as it would a job that never started: its worker stopped on
-- purpose, it did not die under it (reap.lua reads 'left').
--
-- KEYS[1] job  HASH
-- ARGV[1] job id   ARGV[2] token
--
-- Reply: 1. Error: EMQSTALE when the caller no longer holds the lease.
-- @include "moves"
local stale = fence(KEYS[1], ARGV[2], 'leave')
if stale then return stale end
redis.call('HSET', KEYS[1], 'left', ARGV[2])
return 1
