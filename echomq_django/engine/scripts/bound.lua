-- bound (read only): a finished set (completed or dead) as an operator's action on all
-- of it finds it, in one snapshot: how many jobs it holds, the highest score among them
-- and the server's clock. purge and retry_dead act on those jobs only (includes/bulk.lua).
--
-- KEYS[1] state_set  ZSET (completed or dead)
--
-- Reply: {count, the highest score ('' when the set is empty), now_us}
-- @include "clock"
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), top[2] or '', fmt(now_us)}
