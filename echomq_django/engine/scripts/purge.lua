-- purge: an operator deletes the finished jobs (completed or dead) that were in the set
-- when it asked (its bound: bound.lua), `limit` members per call after a cursor (see
-- includes/bulk.lua). Jobs that finished since are kept; the caller loops while `more`.
--
-- KEYS[1] state_set  ZSET (completed or dead)   KEYS[2] metrics  HASH
-- ARGV[1] limit   ARGV[2] the bound's highest score   ARGV[3] the bound's time (server µs)
-- ARGV[4] the cursor: the last member the call before read ('' at first)   ARGV[5] its score
--
-- Reply: {removed, more (1/0), cursor, its score}
-- @include "moves"
-- @include "bulk"
local limit = tonumber(ARGV[1])
local place = string.match(KEYS[1], ':([a-z]+)$')
local batch, more = bulk_batch(KEYS[1], limit, ARGV[2], ARGV[4], ARGV[5])
local removed, after_id, after_score = 0, ARGV[4], ARGV[5]
for _, entry in ipairs(batch) do
  local id = entry[1]
  local jk = row_key(id)
  after_id, after_score = id, entry[2]
  if not newer(jk, place, ARGV[3]) then
    redis.call('ZREM', KEYS[1], id)
    removed = removed + 1
    -- A key of another type at the row's name is not a row: left alone, never a
    -- WRONGTYPE halfway through the batch.
    if is_row(jk) and redis.call('HGET', jk, 'state') == place then
      release_idempotency(jk, id)
      raise_token_floor(jk)
      redis.call('DEL', jk)
    end
  end
end
if removed > 0 then
  bump(KEYS[2], 'purged', removed)
end
return {removed, more and 1 or 0, after_id, after_score}
