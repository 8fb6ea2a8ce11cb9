#!lua flags=allow-oom
-- start: the lease holder marks the jobs it is about to run as started.
--
-- A worker reads ahead: the claim marks only the jobs that start at once, and the
-- others are marked here, in batches, before any of them runs. From then on the
-- reaper treats a lost lease as a run that may have crashed its worker (the job
-- returns `solo`, see reap.lua) rather than a job that merely waited.
--
-- KEYS[1] active  ZSET (names the queue; not written)
-- KEYS[1 + i] job  HASH (job i's row, i = 1..n, all of this queue)
--
-- ARGV[1] worker id   ARGV[2] isolated (1: these runs are in child processes, so a lost
--         lease means the worker itself died, never the job's fault; see reap.lua)
-- ARGV[2 + i] job i's token (the attempts value the claim returned)
--
-- Reply: one entry per job, in order: 1, or an EMQSTALE error when the caller no
-- longer holds that lease (that job must not run; the others may). Idempotent: a
-- job marked already (the call sent again after a lost reply) is left as it is.
--
-- allow-oom (the shebang above): a server at maxmemory with noeviction refuses a
-- flagless script whose first write may grow memory, and this one's HSET is such a
-- write, so a full server could not start the jobs it already leased (nor drain).
-- It grows a row by one worker id and one token: bounded, and it frees the job's
-- whole row soon after (complete, retention).
-- @include "moves"
local worker, isolated, reply = ARGV[1], ARGV[2] == '1', {}
for i = 1, #KEYS - 1 do
  local jk, token = KEYS[1 + i], ARGV[2 + i]
  local stale, row = fence(jk, token, 'start', 'worker_ids', 'run')
  if stale then
    reply[i] = stale
  else
    if row[4] ~= token then  -- marked already: the same call again, after a lost reply
      mark_started(jk, token, worker, row[3], isolated)
    end
    reply[i] = 1
  end
end
return reply
