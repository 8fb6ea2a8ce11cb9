-- The wake-up, inlined by `-- @include "wake"` (moves brings it; enqueue takes it
-- alone, without the moves it does not make).

-- Wake one idle worker blocked on the queue's wake key (BZPOPMIN). The set
-- holds one member, so enqueueing costs one no-op write when nobody waits.
-- Best-effort (pcall), like the counters (common.lua's bump): it comes after the
-- moves it announces, and a key of another type there must not fail them halfway. A
-- worker not woken still sees the work at its next poll (its wait is bounded).
local function wake(wake_key)
  redis.pcall('ZADD', wake_key, 0, 'w')
end
