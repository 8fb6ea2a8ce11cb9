-- retry_dead: an operator sends dead jobs back to pending with a fresh budget.
--
-- The token (attempts) never goes down: the budget is renewed by setting
-- refunds = attempts, so attempts - refunds starts again from zero. A revived
-- job holds its idempotency key again (unless a job enqueued since took it).
--
-- KEYS[1] dead  ZSET   KEYS[2] pending  ZSET   KEYS[3] seq  STRING
-- KEYS[4] metrics HASH KEYS[5] wake     ZSET
-- ARGV[1] limit   ARGV[2..] job ids (none: the oldest `limit` dead jobs)
--
-- Reply: {moved, more (1/0)}. Ids that are not dead (or whose row key holds
-- another type) are skipped: no command fails after the first moves.
-- @include "common"
-- @include "moves"

local limit = tonumber(ARGV[1])
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, limit - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  local jk = row_key(id)
  local removed = redis.call('ZREM', KEYS[1], id)
  if is_row(jk) and redis.call('HGET', jk, 'state') == 'dead' then
    local attempts = redis.call('HGET', jk, 'attempts') or '0'
    redis.call('HSET', jk, 'refunds', attempts)
    redis.call('HDEL', jk, 'finished_at')
    to_pending(jk, id, KEYS[2], KEYS[3], true)
    hold_idempotency(jk, id)
    moved = moved + 1
  elseif removed == 1 and redis.call('EXISTS', jk) == 1 then
    -- in the dead set but the row says otherwise: never leave it in two places
    redis.call('HINCRBY', KEYS[4], 'repaired', 1)
  end
end
if moved > 0 then
  redis.call('HINCRBY', KEYS[4], 'revived', moved)
  wake(KEYS[5])
end
local more = 0
if #ARGV == 1 and redis.call('ZCARD', KEYS[1]) > 0 then more = 1 end
return {moved, more}
