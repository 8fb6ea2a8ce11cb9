-- The wake-up, inlined by `-- @include "wake"` (moves brings it; enqueue takes it
-- alone, without the moves it does not make).

-- Wake one idle worker blocked on the queue's wake key (BZPOPMIN). The set
-- holds one member, so enqueueing costs one no-op write when nobody waits.
local function wake(wake_key)
  redis.call('ZADD', wake_key, 0, 'w')
end
