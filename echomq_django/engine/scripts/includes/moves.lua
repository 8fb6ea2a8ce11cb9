-- The moves between places, inlined by `-- @include "moves"`.
-- @include "clock"
-- Each takes the keys it writes as arguments: the caller declared them in KEYS.
-- Each forgets the row's 'ended' (includes/endings.lua): after any move but the one
-- that recorded it, a re-sent ending is stale; and 'left' (leave.lua), a lease's.

-- Into pending. A fresh sequence puts the job at the back of its priority
-- (promotion, retry); the kept one returns it to its old place (release, reap).
-- The callers have moved the job out of its old place already: a sequence that is not
-- an integer (corrupt) must not fail the move halfway (the job in no place), so the
-- INCR is a pcall and the job keeps its old place in line (or the front) instead.
-- enqueue, which takes the sequence before its first write, is refused by it instead.
local function to_pending(jk, id, pending_key, seq_key, fresh)
  local seq = int_in(redis.call('HGET', jk, 'seq'), 0, 2^53, nil)
  if fresh or not seq then
    local nxt = redis.pcall('INCR', seq_key)
    seq = type(nxt) == 'number' and nxt or seq or 0
  end
  local priority = redis.call('HGET', jk, 'priority')
  redis.call('ZADD', pending_key, fmt(pending_score(priority, seq)), id)
  redis.call('HSET', jk, 'state', 'pending', 'seq', fmt(seq))
  redis.call('HDEL', jk, 'worker', 'lease_deadline', 'due_ms', 'ended', 'left')
end

-- Into dead: kept until now + the row's dead_ttl_ms (the set's score). `cancelled`: an
-- operator's cancel, not a failure (the throughput chart counts failures only).
local function to_dead(jk, id, dead_key, metrics_key, cancelled)
  local ttl = int_in(redis.call('HGET', jk, 'dead_ttl_ms'), 0, ${MAX_DELAY_MS}, ${DEFAULT_DEAD_TTL_MS})
  redis.call('ZADD', dead_key, fmt(now_ms + ttl), id)
  redis.call('HSET', jk, 'state', 'dead', 'finished_at', fmt(now_us))
  redis.call('HDEL', jk, 'worker', 'lease_deadline', 'due_ms', 'cancel', 'ended', 'left')
  release_idempotency(jk, id)
  bump(metrics_key, 'dead')
  if not cancelled then
    count_minute('failed')
  end
end

-- An operator's cancel: a waiting job's (cancel.lua), or a running one's, flagged in its
-- row ('cancel' = the reason) and honoured by whatever ends its lease (a retry, a
-- release, a crash, the reaper): the job goes to dead as Cancelled, never back to wait.
-- `recorded`: the caller's error says Cancelled already (its worker stopped it).
local CANCELLED = '^{"exception_class_path": ?"echomq_django%.engine%.errors%.Cancelled"'
local function to_dead_cancelled(jk, id, reason, dead_key, metrics_key, recorded)
  if not (recorded and string.find(recorded, CANCELLED)) then
    append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.Cancelled",'
      .. '"traceback":"Cancelled: ' .. reason .. '"}', 'Cancelled: ' .. reason, now_us)
  end
  bump(metrics_key, 'cancelled')
  to_dead(jk, id, dead_key, metrics_key, true)
end

-- @include "wake"

-- Due scheduled jobs into pending, at most `limit` of them.
local function promote_due(scheduled_key, pending_key, seq_key, limit)
  local due = redis.call('ZRANGEBYSCORE', scheduled_key, '-inf', fmt(now_ms), 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    redis.call('ZREM', scheduled_key, id)
    local jk = row_key(id)
    if is_row(jk) then
      to_pending(jk, id, pending_key, seq_key, true)
    end
  end
  return #due
end

-- The fence: only the current lease holder (the token minted by claim) may move
-- an active job. Returns an error reply to hand back, or nil and the row's values
-- (state, attempts, then the `...` fields, read in the same HMGET) when the caller holds it.
-- A key of another type at the row's name is refused the same way (CorruptKey), with
-- nothing written: in a batch, the other jobs go on.
local function fence(jk, token, op, ...)
  local row = redis.pcall('HMGET', jk, 'state', 'attempts', ...)
  if row.err then
    return foreign(jk, 'hash') or row
  end
  if not row[1] then
    return redis.error_reply('EMQSTALE ' .. op .. ': the job is gone')
  end
  if row[1] ~= 'active' then
    return redis.error_reply('EMQSTALE ' .. op .. ': the job is ' .. row[1] .. ', not active')
  end
  if row[2] ~= token then
    return redis.error_reply('EMQSTALE ' .. op .. ' token mismatch: holder ' .. tostring(row[2]) .. ', caller ' .. token)
  end
  return nil, row
end

-- The lease holder is about to run the job (the claim marks the jobs that start at
-- once, `start` the rest): `run` names the lease whose run may have begun, which is
-- how the reaper tells a job that was running when its worker died from one that
-- only waited in its read-ahead. The worker's id joins the row's list of runs.
-- `isolated`: the run is in a child process of the worker (`isolated` names its lease).
local function mark_started(jk, token, worker, before, isolated)
  local workers = worker
  if before and before ~= '' then workers = before .. '\n' .. worker end
  redis.call('HSET', jk, 'run', token, 'worker_ids', workers, 'isolated', isolated and token or '0')
  return workers
end

-- When this run began: `ago` µs before now, as the worker measured it on its own
-- monotonic clock (the server's clock stays the reference; the client never sends
-- a time of day). started_at is the first stamped run's; -1: stamped already.
-- Once per run (`stamped` names the lease stamped last): a heartbeat's stamp and the
-- outcome's can cross, each measured with its own latency, and the first one holds.
local function stamp_run(jk, token, ago)
  local us = tonumber(ago)
  if not us or us < 0 or us > now_us then return end
  if redis.call('HGET', jk, 'stamped') == token then return end
  local t = fmt(now_us - us)
  redis.call('HSETNX', jk, 'started_at', t)
  redis.call('HSET', jk, 'last_attempted_at', t, 'stamped', token)
end
