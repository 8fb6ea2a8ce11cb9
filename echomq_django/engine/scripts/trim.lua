-- trim: drop finished jobs (completed or dead) whose score is at most ARGV[2].
--
-- Scores in completed and dead are the time a row may be dropped (finished +
-- its retention), so retention is trim(now). (An operator's purge of the whole set
-- is purge.lua: bounded by the set as it was when asked.) Bounded by ARGV[1] per
-- call; the caller loops while `more` is 1.
--
-- KEYS[1] state_set  ZSET (completed or dead)   KEYS[2] metrics  HASH
-- ARGV[1] limit   ARGV[2] 'now' or a score   ARGV[3] metric to count ('trimmed'/'purged')
--
-- Reply: {removed, more (1/0)}
-- @include "moves"
local max = ARGV[2]
if max == 'now' then max = fmt(now_ms) end
local limit = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', max, 'LIMIT', 0, limit)
local place = string.match(KEYS[1], ':([a-z]+)$')
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local jk = row_key(id)
  -- A key of another type at the row's name is not a row: left alone, never a WRONGTYPE
  -- halfway through the batch.
  if is_row(jk) and redis.call('HGET', jk, 'state') == place then
    release_idempotency(jk, id)
    raise_token_floor(jk)
    redis.call('DEL', jk)
  end
end
if #ids > 0 then
  bump(KEYS[2], ARGV[3], #ids)
end
local more = 0
if #ids == limit and redis.call('ZCOUNT', KEYS[1], '-inf', max) > 0 then more = 1 end
return {#ids, more}
