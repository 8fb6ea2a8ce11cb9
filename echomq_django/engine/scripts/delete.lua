-- delete: an operator removes one job, whatever its state, row and all, unless it runs.
--
-- A job on a live lease is refused (EMQSTATE: cancel it first). Deleting it could not
-- stop its task, and its concurrency slot would go with the row while the task still
-- ran: a cap of N would run N + 1. A job whose lease ran out (its worker is gone or
-- stalled) can be deleted: a holder that comes back finds it gone (EMQSTALE).
-- A corrupt row is deletable too: a HASH without a state, or a key of another
-- type planted at the row's name (nothing of it is read but its type).
--
-- KEYS[1] pending  ZSET   KEYS[2] scheduled  ZSET   KEYS[3] active  ZSET
-- KEYS[4] completed  ZSET   KEYS[5] dead  ZSET   KEYS[6] metrics  HASH   KEYS[7] job  HASH
-- ARGV[1] job id
--
-- Reply: the state the job was in; for a corrupt row, what was wrong with it
-- ('no state', or the key's type: 'string', 'list'...). Error: EMQNOTFOUND, EMQSTATE.
-- @include "limits"
local id, jk = ARGV[1], KEYS[7]
local kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQNOTFOUND job ' .. id) end
local state = kind
if kind == 'hash' then
  state = redis.call('HGET', jk, 'state') or 'no state'
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], id))
  if state == 'active' and deadline and deadline > now_ms then
    return redis.error_reply('EMQSTATE job ' .. id .. ' is running: cancel it first')
  end
  release_idempotency(jk, id)
  gate_unhold(jk, id)
  if state == 'active' then gates_free(id, redis.call('HGET', jk, 'limits')) end
  raise_token_floor(jk)
end
for i = 1, 5 do
  redis.call('ZREM', KEYS[i], id)
end
redis.call('DEL', jk)
bump(KEYS[6], 'deleted')
return state
