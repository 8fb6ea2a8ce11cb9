-- retry_dead: an operator sends dead jobs back to pending with a fresh budget.
--
-- The token (attempts) never goes down: the budget is renewed by setting
-- refunds = attempts, so attempts - refunds starts again from zero; its crash budget
-- starts again too (crashes, and the losses of an isolated run). A revived
-- job holds its idempotency key again. When a job enqueued since holds that key,
-- the revival is refused: two live jobs must never share one key. The refused job
-- stays dead, its last_error says which live job holds the key, and the metrics
-- count it once ('revive_refused'); retry it once the holder has finished.
--
-- KEYS[1] dead  ZSET   KEYS[2] pending  ZSET   KEYS[3] seq  STRING
-- KEYS[4] metrics HASH KEYS[5] wake     ZSET
-- ARGV[1] limit   ARGV[2..] job ids (none: the oldest `limit` dead jobs)
--
-- Reply: {moved, more (1/0)}. Ids that are not dead (or whose row key holds
-- another type) are skipped: no command fails after the first moves. Without
-- ids, refused jobs stay at the front of the dead set: each call reads past
-- them, at most 10 * limit members, and `more` is 0 once a call moves (or drops)
-- nothing: past 10 * limit refused jobs in a row a sweep stops early.
-- @include "moves"
local limit = tonumber(ARGV[1])
local moved, removed, refused = 0, 0, 0

-- One member of the dead set: revived, refused (stays), or dropped as not dead.
local function revive(id)
  local jk = row_key(id)
  if is_row(jk) and redis.call('HGET', jk, 'state') == 'dead' then
    local holder = hold_idempotency(jk, id)
    if holder then
      local why = 'not retried: its idempotency key is held by live job ' .. holder
      if redis.call('HGET', jk, 'last_error') ~= why then  -- counted once, not per call
        redis.call('HSET', jk, 'last_error', why)
        bump(KEYS[4], 'revive_refused')
      end
      refused = refused + 1
      return
    end
    redis.call('ZREM', KEYS[1], id)
    local attempts = redis.call('HGET', jk, 'attempts') or '0'
    redis.call('HSET', jk, 'refunds', attempts)
    redis.call('HDEL', jk, 'finished_at', 'crashes', 'lost_isolated')
    to_pending(jk, id, KEYS[2], KEYS[3], true)
    moved = moved + 1
  elseif redis.call('ZREM', KEYS[1], id) == 1 then
    removed = removed + 1
    if redis.call('EXISTS', jk) == 1 then
      -- in the dead set but the row says otherwise: never leave it in two places
      bump(KEYS[4], 'repaired')
    end
  end
end

local more = 0
if #ARGV > 1 then
  for i = 2, #ARGV do revive(ARGV[i]) end
else
  local scanned = 0
  while moved < limit and scanned < 10 * limit do
    -- members before `refused` were all refused: the first not yet seen is there
    local ids = redis.call('ZRANGE', KEYS[1], refused, refused + limit - moved - 1)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do revive(id) end
    scanned = scanned + #ids
  end
  if moved + removed > 0 and redis.call('ZCARD', KEYS[1]) > refused then more = 1 end
end
if moved > 0 then
  bump(KEYS[4], 'revived', moved)
  wake(KEYS[5])
end
return {moved, more}
