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
-- ARGV[1] limit   ARGV[2] 'ids' (the given jobs) or 'all' (the dead set as it was when
-- asked)   ARGV[3..] with 'ids': the job ids, at most `limit`
-- ARGV[3] with 'all': the bound's highest score (bound.lua)   ARGV[4] the bound's time
-- (server µs)   ARGV[5] the cursor: the last member the call before read ('' at first)
-- ARGV[6] its score
--
-- Reply: {moved, more (1/0), cursor, its score, refused}. Ids that are not dead (or
-- whose row key holds another type) are skipped: no command fails after the first
-- moves. With 'all', each call reads `limit` members after the cursor (see
-- includes/bulk.lua): the jobs that died after the bound (a job this sweep retried,
-- failing again, too) and the refused jobs stay where they are, so the sweep retries
-- each job at most once and ends once it has passed the bound.
-- @include "moves"
-- @include "bulk"
local limit = tonumber(ARGV[1])
local moved, refused = 0, 0

-- One member of the dead set: revived, refused (it stays), or dropped as not dead.
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
  elseif redis.call('ZREM', KEYS[1], id) == 1 and redis.call('EXISTS', jk) == 1 then
    -- in the dead set but the row says otherwise: never leave it in two places
    bump(KEYS[4], 'repaired')
  end
end

local more, after_id, after_score = false, '', ''
if ARGV[2] == 'ids' then
  for i = 3, #ARGV do revive(ARGV[i]) end
else
  after_id, after_score = ARGV[5], ARGV[6]
  local batch
  batch, more = bulk_batch(KEYS[1], limit, ARGV[3], after_id, after_score)
  for _, entry in ipairs(batch) do
    local id = entry[1]
    after_id, after_score = id, entry[2]
    if not newer(row_key(id), 'dead', ARGV[4]) then revive(id) end
  end
end
if moved > 0 then
  bump(KEYS[4], 'revived', moved)
  wake(KEYS[5])
end
return {moved, more and 1 or 0, after_id, after_score, refused}
