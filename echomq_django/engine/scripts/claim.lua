-- claim: lease up to N jobs to one worker, promoting due scheduled jobs first.
--
-- For each job: ZPOPMIN pending (highest priority, then oldest), HINCRBY the
-- row's attempts (the fencing token: it only ever goes up, one per claim),
-- stamp the lease on the server clock and score it into active.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] active  ZSET
-- KEYS[4] seq      STRING KEYS[5] metrics    HASH   KEYS[6] wake    ZSET
-- KEYS[7] dead     ZSET
--
-- ARGV[1] count   ARGV[2] worker id   ARGV[3] default lease_ms   ARGV[4] promote limit
-- ARGV[5..] the row fields to return, in order (jobs.ROW_FIELDS; it must name id,
--           state, attempts, lease_ms, started_at, last_attempted_at,
--           lease_deadline, worker and worker_ids)
--
-- Reply: {now_ms, next_due_ms or -1, job...} where each job is its row's fields
-- ARGV[5..] after the claim (attempts = the token). A popped id without a row (or with a
-- key of another type in its place, or that is not a job id at all) is dropped:
-- the pop repairs the set, and no command can fail on a wrong type after the
-- batch was popped. A row whose attempts is not an integer goes to dead.
-- @include "common"
-- @include "moves"

local count, worker, default_lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
promote_due(KEYS[2], KEYS[1], KEYS[4], tonumber(ARGV[4]))

-- Where each field sits in a reply row.
local at = {}
for i = 5, #ARGV do
  at[ARGV[i]] = i - 4
end

local reply = {now_ms, -1}
local popped = redis.call('ZPOPMIN', KEYS[1], count)
local claimed, dangling = 0, 0
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = row_key(id)
  -- One read gives the reply row and what the claim needs. A key of another type at
  -- the row's name fails it (pcall) before any write; a row always has 'id' (the
  -- claim rewrites it), so only a row without one costs an EXISTS.
  local row = is_job_id(id) and redis.pcall('HMGET', jk, unpack(ARGV, 5))
  if not row or row.err or (not row[at.id] and redis.call('EXISTS', jk) == 0) then
    dangling = dangling + 1
  else
    local token = redis.pcall('HINCRBY', jk, 'attempts', 1)
    if type(token) == 'table' then
      append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.CorruptRow",'
        .. '"traceback":"attempts is not an integer"}', 'CorruptRow: attempts is not an integer')
      to_dead(jk, id, KEYS[7], KEYS[5])
    else
      -- Only a lease enqueue allows (1 ms .. 7 days): Lua reads 'inf' and 'nan' as
      -- numbers, and '%d' of an infinite deadline is -2^63 (reaped at once, run twice).
      local lease = tonumber(row[at.lease_ms])
      if not (lease and lease >= 1 and lease <= 604800000) then lease = default_lease end
      local deadline = now_ms + lease
      local workers, before = worker, row[at.worker_ids]
      if before and before ~= '' then workers = before .. '\n' .. worker end
      local started = row[at.started_at]
      if not started or started == '' then started = fmt(now_us) end
      -- The key names the job: 'id' is rewritten from it, so a row planted without
      -- an id (or with another job's) still comes back as this job, and is fenced
      -- and dead-lettered under its own key.
      redis.call('HSET', jk, 'id', id, 'state', 'active', 'worker', worker, 'worker_ids', workers,
        'last_attempted_at', fmt(now_us), 'lease_deadline', fmt(deadline), 'started_at', started)
      redis.call('ZADD', KEYS[3], fmt(deadline), id)
      row[at.id], row[at.state], row[at.attempts] = id, 'active', fmt(token)
      row[at.worker], row[at.worker_ids], row[at.started_at] = worker, workers, started
      row[at.last_attempted_at], row[at.lease_deadline] = fmt(now_us), fmt(deadline)
      reply[#reply + 1] = row
      claimed = claimed + 1
    end
  end
end
if claimed > 0 then
  redis.call('HINCRBY', KEYS[5], 'claimed', claimed)
end
if dangling > 0 then
  redis.call('HINCRBY', KEYS[5], 'dangling', dangling)
end
-- Chain the wake-up: more work is ready, so let another idle worker in.
if #popped > 0 and redis.call('ZCARD', KEYS[1]) > 0 then
  wake(KEYS[6])
end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if nxt[2] then reply[2] = tonumber(nxt[2]) end
return reply
