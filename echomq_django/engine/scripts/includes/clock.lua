-- The server clock, inlined by `-- @include "clock"` (it brings "common").
-- @include "common"

-- The server clock: TIME inside the script, never a client's "now".
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local now_ms = math.floor(now_us / 1000)

-- Throughput per minute for the admin's chart: one HASH per minute, expiring.
local function count_minute(field, n)
  n = n or 1
  local key = base .. 'tp:' .. fmt(math.floor(now_ms / 60000))
  if bump(key, field, n) == n then  -- best-effort (see bump)
    redis.call('EXPIRE', key, ${THROUGHPUT_TTL_S})
  end
end
