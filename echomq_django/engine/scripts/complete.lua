-- complete: lease holders retire their jobs with results, one or many per call.
--
-- KEYS[1] active  ZSET   KEYS[2] completed  ZSET   KEYS[3] metrics  HASH
-- KEYS[3 + i] job  HASH (job i's row, i = 1..n, all of this queue)
--
-- ARGV[4i - 3] job i's id   ARGV[4i - 2] its token (the attempts value the claim
-- returned)   ARGV[4i - 1] its result (opaque string)   ARGV[4i] µs since its run
-- began (-1: stamped already; see stamp_run)
--
-- Reply: one entry per job, in order: finished_at (server µs), or an EMQSTALE
-- error when the caller no longer holds that lease (reaped, re-claimed, failed or
-- removed); that job is left unchanged, the others complete. Idempotent: the same
-- call again (its reply was lost) answers the same finished_at and changes nothing.
-- Each job's move is the same as alone; batching shares the clock, the counters and
-- the round trip (a worker flushes the completions of its short jobs together).
-- The row is kept until finished + result_ttl_ms: that is its score in completed.
-- @include "limits"
local reply, done = {}, 0
for i = 1, #KEYS - 3 do
  local jk, id, token = KEYS[3 + i], ARGV[4 * i - 3], ARGV[4 * i - 2]
  local stale, row = fence(jk, token, 'complete', 'result_ttl_ms', 'idem', 'started_at', 'limits',
    'stamped')
  if stale then
    local was = redis.pcall('HMGET', jk, 'state', 'attempts', 'finished_at')
    if not was.err and was[1] == 'completed' and was[2] == token and was[3] then
      reply[i] = was[3]
    else
      reply[i] = stale
    end
  else
    local ttl = int_in(row[3], 0, ${MAX_DELAY_MS}, ${DEFAULT_RESULT_TTL_MS})
    -- ZREM first: under maxmemory a flagless script is refused at its first write that
    -- may grow memory, and a full server must still finish its jobs.
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], fmt(now_ms + ttl), id)
    -- The run's start time (stamp_run, folded into this one HSET: this is the hot path).
    local ran = tonumber(ARGV[4 * i])
    if ran and ran >= 0 and ran <= now_us and row[7] ~= token then
      local began = fmt(now_us - ran)
      redis.call('HSET', jk, 'state', 'completed', 'finished_at', fmt(now_us),
        'result', ARGV[4 * i - 1], 'last_attempted_at', began, 'started_at', row[5] or began,
        'stamped', token)
    else
      redis.call('HSET', jk, 'state', 'completed', 'finished_at', fmt(now_us),
        'result', ARGV[4 * i - 1])
    end
    redis.call('HDEL', jk, 'worker', 'lease_deadline', 'cancel')  -- (a cancel too late)
    release_idempotency(jk, id, row[4] or '')
    gates_free(id, row[6])
    reply[i] = fmt(now_us)
    done = done + 1
  end
end
if done > 0 then
  bump(KEYS[3], 'completed', done)
  count_minute('completed', done)
end
return reply
