-- limit_stats: a queue's limits now, for the admin, Prometheus and `echomq stats`
-- (read-only). See includes/limits.lua for the gates.
--
-- KEYS[1] limits HASH (emq:{q}:limits: gate name -> spec)
-- ARGV[1] how many gates at most (one HSCAN page; keyed caps of idle keys leave it)
--
-- Reply: {name, spec, level, waiting} per gate, where level is, for a rate limit, the
-- tokens available now (a decimal string), for a cap the jobs leased now; waiting:
-- the jobs held back on it (still pending, in their order).
-- @include "clock"
local page = redis.call('HSCAN', KEYS[1], 0, 'COUNT', tonumber(ARGV[1]))[2]
local reply = {}
for i = 1, #page, 2 do
  local name, spec = page[i], page[i + 1]
  local gate = base .. 'gate:' .. name
  local level = 0
  if string.sub(name, 1, 5) == 'rate:' then
    local n, per, burst = string.match(spec, '/(%d+)/(%d+)/(%d+)$')
    if n then
      local interval = tonumber(per) * 1000 / tonumber(n)
      local tat = tonumber(redis.pcall('GET', gate)) or 0
      if tat < now_us then tat = now_us end
      level = (tonumber(burst) * interval - (tat - now_us)) / interval
      if level < 0 then level = 0 end
    end
  else
    level = redis.pcall('ZCOUNT', gate, '(' .. fmt(now_ms), '+inf')
    if type(level) ~= 'number' then level = 0 end
  end
  local waiting = redis.pcall('ZCARD', base .. 'held:' .. name)
  if type(waiting) ~= 'number' then waiting = 0 end
  reply[#reply + 1] = {name, spec, string.format('%.3f', level), waiting}
end
return reply
