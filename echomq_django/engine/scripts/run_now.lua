-- run_now: an operator moves one scheduled job to pending at once.
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq  STRING
-- KEYS[4] wake     ZSET   KEYS[5] job        HASH
-- ARGV[1] job id
--
-- Reply: 1. Error: EMQNOTFOUND (no row), EMQSTATE (not scheduled).
-- @include "moves"
local id, jk = ARGV[1], KEYS[5]
local bad = foreign(jk, 'hash')
if bad then return bad end
local state = redis.call('HGET', jk, 'state')
if not state then return redis.error_reply('EMQNOTFOUND job ' .. id) end
if state ~= 'scheduled' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. state .. ', not scheduled')
end
redis.call('ZREM', KEYS[2], id)
to_pending(jk, id, KEYS[1], KEYS[3], true)
wake(KEYS[4])
return 1
