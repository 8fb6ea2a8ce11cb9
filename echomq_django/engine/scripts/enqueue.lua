-- enqueue: store new jobs' rows and put each in pending (or scheduled if not yet due).
--
-- KEYS[1] pending     ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq      STRING
-- KEYS[4] metrics     HASH   KEYS[5] wake       ZSET
-- KEYS[5 + i] job  HASH (job i's row, i = 1..n)
-- KEYS[5 + n + k] idempotency  STRING (one per job that has a key, in order; the row
--                 keeps the key's digest, the part after ':idem:')
--
-- ARGV[1] n (the jobs in this call)
-- ARGV[2 + 14(i-1)..] job i's 14 values: id, payload (opaque), task path, priority
-- (-100..100), max_attempts, lease_ms (0 = worker default), due_ms (absolute Unix ms;
-- 0 = now), run_after (exact, opaque), result_ttl_ms, dead_ttl_ms, the KEYS index of
-- its idempotency key (0: none), timeout_ms (0 = no time limit of its own), limits (its gates, includes/limits.lua; '' none),
-- and its key's variant: '' (unique until finished), 't<ms>' (throttle: one job per
-- key per window, whatever its state) or 'd<ms>' (debounce: run ms after the last
-- enqueue, or at due_ms if later, with the last enqueue's payload).
--
-- Reply: one entry per job, in order: {id, state, created, enqueued_at} where created
-- is 1 (stored), 0 when the key is held (until finished: by a job still pending,
-- scheduled or active; throttle: by the window's job, whatever its state while its
-- row exists), or 2 when debounced: the pending or scheduled job holding the key took
-- this payload and limits and is due ms from now (its id returned, state
-- 'scheduled'); a key held by a running job is taken by a new job. enqueued_at is the
-- returned row's server time in µs. Or an EMQEXISTS error when a row with this id
-- exists already; that job is not stored, the others are. Batching (the backend's
-- bulk enqueue) shares the clock, the sequence INCRBY, the counters and the wake-up.
-- @include "store_job"
-- @include "unhold"
-- @include "wake"
local n = tonumber(ARGV[1])
-- The sequence is read first: a corrupt one refuses the call before any write, never
-- after a row (a row in no place). It is taken (INCRBY) once a job is stored; a job
-- refused or scheduled leaves a gap: harmless.
local seq, corrupt_seq = take_seq(KEYS[3], n, true)
if corrupt_seq then return corrupt_seq end
local reply, stored = {}, 0

-- A holder row's enqueued_at as the reply carries it: '' (no time) unless it is a
-- whole number, for the caller parses it as one; a corrupt row must not fail the
-- reply of an enqueue that has done its work (a debounce has moved the holder).
local function enqueued_at(v)
  local us = int_in(v, 0, 2^53, nil)
  return us and fmt(us) or ''
end

-- The job holding the key, if it is still live; or the error of a key of another
-- type planted there (pcall: a refusal of this job before its first write, not an
-- abort of the batch halfway).
local function held_by(idem)
  local holder = redis.pcall('GET', idem)
  if type(holder) ~= 'string' then
    return holder and (foreign(idem, 'string') or holder) or nil
  end
  local row = redis.pcall('HMGET', row_key(holder), 'state', 'enqueued_at')
  if row.err then
    return foreign(row_key(holder), 'hash') or row
  end
  local state = row[1]
  if state == 'pending' or state == 'scheduled' or state == 'active' then
    return {holder, state, 0, enqueued_at(row[2])}
  end
end

-- Debounce: the key's pending or scheduled job takes the new payload and waits again.
local function debounce(holder, a, delay)
  local jk = row_key(holder)
  local due = math.max(now_ms + delay, tonumber(ARGV[a + 7]) or 0)
  redis.call('ZREM', KEYS[1], holder)
  gate_unhold(jk, holder)
  redis.call('ZADD', KEYS[2], fmt(due), holder)
  redis.call('HSET', jk, 'payload', ARGV[a + 2], 'limits', ARGV[a + 13], 'run_after', ARGV[a + 8],
    'state', 'scheduled', 'due_ms', fmt(due))
  redis.call('HDEL', jk, 'ended')  -- a move: see moves.lua
  announce_gates(ARGV[a + 13])
  return {holder, 'scheduled', 2, enqueued_at(redis.call('HGET', jk, 'enqueued_at'))}
end

for i = 1, n do
  local a = 1 + 14 * (i - 1)
  local id, jk = ARGV[a + 1], KEYS[5 + i]
  local idem = KEYS[tonumber(ARGV[a + 11])]
  local variant, window = string.match(ARGV[a + 14], '^([td])(%d+)$')
  window = tonumber(window)
  local due = tonumber(ARGV[a + 7]) or 0
  seq = seq + 1
  if redis.call('EXISTS', jk) == 1 then
    reply[i] = redis.error_reply('EMQEXISTS job ' .. id .. ' exists already')
  elseif idem and variant == 't' then
    -- Throttle: the window's first job answers, whatever its state (its row kept).
    local holder = redis.pcall('GET', idem)
    if type(holder) == 'string' then
      local row = redis.pcall('HMGET', row_key(holder), 'state', 'enqueued_at')
      if row.err then
        reply[i] = foreign(row_key(holder), 'hash') or row
      elseif row[1] then
        reply[i] = {holder, row[1], 0, enqueued_at(row[2])}
      end
    elseif holder then
      reply[i] = foreign(idem, 'string') or holder
    end
  elseif idem then
    reply[i] = held_by(idem)
    if variant == 'd' and reply[i] and not reply[i].err then
      if reply[i][2] == 'active' then
        reply[i] = nil  -- it runs with the old payload: a new job takes the key
      else
        reply[i] = debounce(reply[i][1], a, window)
      end
    end
  end
  if not reply[i] then
    local digest = idem and string.match(idem, ':idem:(%x+)$') or ''
    if variant == 't' then
      -- The key outlives the job, for the window: the row does not name it (finishing
      -- must not release it).
      redis.call('SET', idem, id, 'PX', fmt(window))
      digest = ''
    elseif idem then
      redis.call('SET', idem, id)
    end
    if variant == 'd' and due < now_ms + window then due = now_ms + window end
    local state = store_job(jk, id, seq, KEYS[1], KEYS[2], ARGV[a + 2], ARGV[a + 3],
      ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], due, ARGV[a + 8],
      ARGV[a + 9], ARGV[a + 10], digest, ARGV[a + 12], ARGV[a + 13])
    reply[i] = {id, state, 1, fmt(now_us)}
    stored = stored + 1
  end
end
if stored > 0 then
  redis.call('INCRBY', KEYS[3], n)  -- a whole number below 2^50: it cannot fail
  wake(KEYS[5])
  bump(KEYS[4], 'enqueued', stored)  -- best-effort, like wake: the jobs are stored
end
return reply
