-- delete: an operator removes one job, whatever its state, row and all.
--
-- An active job's holder finds it gone: its complete or retry gets EMQSTALE.
--
-- KEYS[1] pending  KEYS[2] scheduled  KEYS[3] active  KEYS[4] completed  KEYS[5] dead (ZSETs)
-- KEYS[6] metrics HASH   KEYS[7] job row HASH
-- ARGV[1] job id
--
-- Reply: the state the job was in. Error: EMQNOTFOUND.
-- @include "common"
-- @include "moves"

local id, jk = ARGV[1], KEYS[7]
local state = redis.call('HGET', jk, 'state')
if not state then return redis.error_reply('EMQNOTFOUND job ' .. id) end
for i = 1, 5 do
  redis.call('ZREM', KEYS[i], id)
end
release_idempotency(jk, id)
redis.call('DEL', jk)
redis.call('HINCRBY', KEYS[6], 'deleted', 1)
return state
