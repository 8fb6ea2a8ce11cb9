-- enqueue: store a new job's row and put it in pending (or scheduled if not yet due).
--
-- KEYS[1] pending     ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq      STRING
-- KEYS[4] metrics     HASH   KEYS[5] wake       ZSET   KEYS[6] job row  HASH
-- KEYS[7] idempotency STRING (optional: present only when the job has a key;
--                            the row keeps its digest, the part after ':idem:')
--
-- ARGV[1] job id      ARGV[2] payload (opaque string)   ARGV[3] task path
-- ARGV[4] priority (-100..100)   ARGV[5] max_attempts   ARGV[6] lease_ms (0 = worker default)
-- ARGV[7] due_ms (absolute Unix ms; 0 = now)   ARGV[8] run_after (exact, opaque)
-- ARGV[9] result_ttl_ms   ARGV[10] dead_ttl_ms
--
-- Reply: {id, state, created, enqueued_at} where created is 1, or 0 when the
-- idempotency key is held by a job still pending, scheduled or active (that job's
-- id, state and enqueued_at returned). enqueued_at is the row's server time in µs.
-- Error: EMQEXISTS when a row with this id exists already.
-- @include "common"
-- @include "moves"

local id, jk, idem = ARGV[1], KEYS[6], KEYS[7]
local digest = idem and string.match(idem, ':idem:(%x+)$') or ''

if redis.call('EXISTS', jk) == 1 then
  return redis.error_reply('EMQEXISTS job ' .. id .. ' exists already')
end
if idem then
  local holder = redis.call('GET', idem)
  if holder then
    local state = redis.call('HGET', row_key(holder), 'state')
    if state == 'pending' or state == 'scheduled' or state == 'active' then
      return {holder, state, 0, redis.call('HGET', row_key(holder), 'enqueued_at') or ''}
    end
  end
end

-- The sequence first: if INCR fails (a corrupt counter), it fails before any write,
-- never after the row (a row in no place). A scheduled job leaves a gap: harmless.
local seq = redis.call('INCR', KEYS[3])
if idem then
  redis.call('SET', idem, id)
end
local due = tonumber(ARGV[7]) or 0
local state = 'pending'
redis.call('HSET', jk,
  'id', id, 'payload', ARGV[2], 'task', ARGV[3], 'priority', ARGV[4],
  'attempts', 0, 'refunds', 0, 'max_attempts', ARGV[5], 'lease_ms', ARGV[6],
  'enqueued_at', fmt(now_us), 'run_after', ARGV[8],
  'result_ttl_ms', ARGV[9], 'dead_ttl_ms', ARGV[10], 'idem', digest)
if due > now_ms then
  state = 'scheduled'
  redis.call('ZADD', KEYS[2], fmt(due), id)
  redis.call('HSET', jk, 'state', state, 'due_ms', fmt(due))
else
  redis.call('ZADD', KEYS[1], fmt(pending_score(ARGV[4], seq)), id)
  redis.call('HSET', jk, 'state', state, 'seq', fmt(seq))
end
wake(KEYS[5])
redis.call('HINCRBY', KEYS[4], 'enqueued', 1)
return {id, state, 1, fmt(now_us)}
