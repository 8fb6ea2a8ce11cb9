-- reap: expired leases back to pending, or to dead past max_attempts.
--
-- A lease past its deadline (server clock) means the worker died or stalled.
-- The attempt counts (no refund: a job that kills its worker every time must
-- end in dead, not loop forever); a LeaseExpired error is recorded. Bounded:
-- at most ARGV[1] jobs per call; the caller loops while `more` is 1.
--
-- KEYS[1] active  ZSET   KEYS[2] pending  ZSET   KEYS[3] dead  ZSET
-- KEYS[4] seq     STRING KEYS[5] metrics  HASH   KEYS[6] wake  ZSET
-- ARGV[1] limit
--
-- Reply: {returned to pending, moved to dead, dangling ids dropped, more (1/0)}
-- A dangling id (no row, a key of another type, a row not active) is only
-- dropped from active: no command can fail on it after the batch's first moves.
-- @include "common"
-- @include "moves"

local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now_ms), 'LIMIT', 0, tonumber(ARGV[1]))
local returned, dead, dangling = 0, 0, 0
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  local jk = row_key(id)
  local row = {}
  if is_row(jk) then
    row = redis.call('HMGET', jk, 'state', 'worker', 'lease_deadline')
  end
  if row[1] ~= 'active' then
    dangling = dangling + 1
  else
    local holder = row[2] or '?'
    append_error(jk, '{"exception_class_path":"echomq_django.engine.errors.LeaseExpired",'
      .. '"traceback":"LeaseExpired: the lease held by worker ' .. holder
      .. ' expired at ' .. tostring(row[3]) .. ' ms (server clock) before the job finished"}',
      'LeaseExpired: lease held by ' .. holder .. ' expired')
    local used, max = used_attempts(jk)
    if used >= max then
      to_dead(jk, id, KEYS[3], KEYS[5])
      dead = dead + 1
    else
      to_pending(jk, id, KEYS[2], KEYS[4], false)
      returned = returned + 1
    end
  end
end
if returned > 0 then
  redis.call('HINCRBY', KEYS[5], 'reaped', returned)
  wake(KEYS[6])
end
if dead > 0 then
  redis.call('HINCRBY', KEYS[5], 'reaped_dead', dead)
end
local more = 0
if #expired == tonumber(ARGV[1]) and redis.call('ZCOUNT', KEYS[1], '-inf', fmt(now_ms)) > 0 then
  more = 1
end
return {returned, dead, dangling, more}
