-- claim: lease up to N jobs to one worker, promoting due scheduled jobs first.
--
-- For each job: ZPOPMIN pending (highest priority, then oldest), HINCRBY the
-- row's attempts (the fencing token: it only ever goes up, one per claim),
-- stamp the lease on the server clock and score it into active.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] active  ZSET
-- KEYS[4] seq      STRING KEYS[5] metrics    HASH   KEYS[6] wake    ZSET
-- KEYS[7] dead     ZSET   KEYS[8] claim    STRING (this claim's record, emq:{q}:claim:<claim id>)
--
-- ARGV[1] count   ARGV[2] worker id   ARGV[3] default lease_ms   ARGV[4] promote limit
-- ARGV[5] how many of the claimed jobs start at once (the worker's idle executors):
--         those are marked started in this call, the rest by a later `start`
-- ARGV[6] isolated (1: the worker runs jobs in child processes; see start.lua)
-- ARGV[7..] the row fields to return, in order (jobs.ROW_FIELDS; it must name id,
--           state, attempts, lease_ms, lease_deadline, worker, worker_ids, solo, run,
--           limits)
--
-- Reply: {now_ms, next_due_ms or -1, job...} where each job is its row's fields,
-- those of ARGV[7..], after the claim (attempts = the token). next_due_ms: the earliest
-- of the first scheduled job's due time and the time a gate with held jobs may admit again.
--
-- Flow control (includes/limits.lua): a job whose row names gates (rate limits,
-- concurrency caps) is claimed only if every gate admits it now, and then spends a
-- token / holds a slot until its lease ends. One that a gate refuses is parked on that
-- gate's line, still pending and in its order, and the claim goes on with the jobs
-- behind it (up to 4 pops), so other tasks are never blocked by a limited one. A queue
-- without limits pays one ZRANGE of an empty key per claim; a job without limits
-- pays nothing more.
--
-- Idempotent per claim id: the record (KEYS[8], kept for the default lease) lists
-- the jobs this claim leased, so a worker whose reply was lost asks again with the
-- same id and gets the same jobs back (those it still holds), not a second batch;
-- nothing is counted twice and no job is stranded for a lease.
--
-- A `solo` job (it was running, or may have been, when a worker died) is claimed
-- alone: a batch stops before it, and it is never batched with others, so a job
-- that kills its worker cannot take healthy jobs with it twice.
--
-- A popped id without a row (or with a key of another type in its place, or that
-- is not a job id at all) is dropped: the pop repairs the set, and no command can
-- fail on a wrong type after the batch was popped. A row whose attempts is not an
-- integer goes to dead.
-- @include "limits"
local want, worker, default_lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local start_now, isolated = tonumber(ARGV[5]), ARGV[6] == '1'

-- Where each field sits in a reply row.
local at = {}
for i = 7, #ARGV do
  at[ARGV[i]] = i - 6
end
local reply = {now_ms, -1}

local gated = false  -- some gate has held jobs: its time counts as a due time too

local function next_due()
  local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if nxt[2] then reply[2] = tonumber(nxt[2]) end
  local gate = gated and gates_next()
  if gate and (reply[2] < 0 or gate < reply[2]) then reply[2] = gate end
  return reply
end

-- A replay: the reply of this claim was lost. Return what it leased that the worker
-- still holds under the same token; claim nothing new.
local record = redis.pcall('GET', KEYS[8])
if type(record) == 'table' then return foreign(KEYS[8], 'string') or record end
if record then
  for id, token in string.gmatch(record, '(%S+):(%d+)') do
    local row = redis.pcall('HMGET', row_key(id), unpack(ARGV, 7))
    if not row.err and row[at.state] == 'active' and row[at.attempts] == token
      and row[at.worker] == worker then
      reply[#reply + 1] = row
    end
  end
  return next_due()
end

promote_due(KEYS[2], KEYS[1], KEYS[4], tonumber(ARGV[4]))
gated = gates_open(KEYS[1], want)
-- A reply is bounded by bytes as well as by count: jobs near MAX_PAYLOAD would make a
-- claim of 250 a reply of ~100 MiB (the server builds it all, the client reads it all).
local CLAIM_BYTES = 8388608
local claimed, dangling, parked, leased, popped, bytes = 0, 0, 0, {}, {}, 0

-- Put the popped jobs from the i-th on back, in their order.
local function put_back(from)
  for j = from, #popped, 2 do
    redis.call('ZADD', KEYS[1], popped[j + 1], popped[j])
  end
end

-- Claim the popped jobs in order (inline, not a function: the loop's counters stay
-- registers, and this is every job's path). Jobs parked on a gate leave room in the
-- batch: pop again behind them (bounded). A solo job ends the claim (`stop`).
local pops, any, stop = 0, false, false
repeat
  local before = parked
  popped = redis.call('ZPOPMIN', KEYS[1], want - claimed)
  pops, any = pops + 1, any or #popped > 0
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = row_key(id)
    -- One read gives the reply row and what the claim needs. A key of another type at
    -- the row's name fails it (pcall) before any write; a row always has 'id' (the
    -- claim rewrites it), so only a row without one costs an EXISTS.
    local row = is_job_id(id) and redis.pcall('HMGET', jk, unpack(ARGV, 7))
    local gates, refused, due
    if row and not row.err and row[at.limits] and row[at.limits] ~= '' then
      gates = gates_of(row[at.limits])
      refused, due = gate_refusal(gates)
    end
    if not row or row.err or (not row[at.id] and redis.call('EXISTS', jk) == 0) then
      dangling = dangling + 1
    elseif row[at.solo] == '1' and claimed > 0 then
      -- It and the rest go back, in their order: it goes alone, in a claim of its own.
      put_back(i)
      stop = true
      break
    elseif refused and gate_hold(jk, id, popped[i + 1], refused, due) then
      gated, parked = true, parked + 1
    else  -- (a job gate_hold could not park is leased: see includes/limits.lua)
      local token = redis.pcall('HINCRBY', jk, 'attempts', 1)
      -- A token is a count of claims below 2^53 (bounds.MAX_TOKEN, what a worker may send
      -- back): a planted negative count made token 0 or less, a huge one a token Lua
      -- cannot hold exactly.
      local corrupt_row = type(token) == 'table' and 'attempts is not an integer'
        or (token < 1 or token > ${MAX_TOKEN}) and 'attempts is negative or too large'
      if corrupt_row then
        append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.CorruptRow",'
          .. '"traceback":"' .. corrupt_row .. '"}', 'CorruptRow: ' .. corrupt_row, now_us)
        to_dead(jk, id, KEYS[7], KEYS[5])
      else
        -- Only a lease enqueue allows (1 ms .. 7 days): Lua reads 'inf' and 'nan' as
        -- numbers, and '%d' of an infinite deadline is -2^63 (reaped at once, run twice).
        local lease = int_in(row[at.lease_ms], 1, ${MAX_LEASE_MS}, default_lease)
        local deadline = now_ms + lease
        -- The key names the job: 'id' is rewritten from it, so a row planted without
        -- an id (or with another job's) still comes back as this job, and is fenced
        -- and dead-lettered under its own key.
        row[at.id], row[at.state], row[at.attempts] = id, 'active', fmt(token)
        row[at.worker], row[at.lease_deadline] = worker, fmt(deadline)
        if claimed < start_now and row[at.solo] ~= '1' then  -- marked started: see start.lua
          local workers, before = worker, row[at.worker_ids]
          if before and before ~= '' then workers = before .. '\n' .. worker end
          row[at.worker_ids], row[at.run] = workers, fmt(token)
          redis.call('HSET', jk, 'id', id, 'state', 'active', 'worker', worker,
            'lease_deadline', fmt(deadline), 'run', fmt(token), 'worker_ids', workers,
            'isolated', isolated and fmt(token) or '0')
        else
          redis.call('HSET', jk, 'id', id, 'state', 'active', 'worker', worker,
            'lease_deadline', fmt(deadline))
        end
        redis.call('ZADD', KEYS[3], fmt(deadline), id)
        if gates then
          for _, g in ipairs(gates) do
            gate_take(g, id, deadline)
          end
        end
        reply[#reply + 1] = row
        leased[#leased + 1] = id .. ':' .. fmt(token)
        claimed = claimed + 1
        bytes = bytes + #(row[at.payload] or '')
        if row[at.solo] == '1' or bytes >= CLAIM_BYTES then  -- alone, or the reply is full
          put_back(i + 2)
          stop = true
          break
        end
      end
    end
  end
until stop or #popped == 0 or parked == before or claimed >= want or pops == 4
-- The record before any bookkeeping (SET takes a key of any type): the counters and
-- the wake-up are best-effort (bump, wake), so nothing after the leases can fail.
if claimed > 0 then
  redis.call('SET', KEYS[8], table.concat(leased, ' '), 'PX', default_lease)
  bump(KEYS[5], 'claimed', claimed)
end
if dangling > 0 then
  bump(KEYS[5], 'dangling', dangling)
end
-- Chain the wake-up: more work is ready, so let another idle worker in.
if any and redis.call('ZCARD', KEYS[1]) > 0 then
  wake(KEYS[6])
end
return next_due()
