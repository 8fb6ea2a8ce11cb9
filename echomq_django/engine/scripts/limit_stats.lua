-- limit_stats: a queue's limits now, for the admin, Prometheus and `echomq stats`
-- (read-only). See includes/limits.lua for the gates.
--
-- KEYS[1] limits HASH (emq:{q}:limits: gate name -> spec)
-- ARGV[1] the most entries of the hash to read (a bound on this call's work)
--
-- Every gate of the hash is listed: the queue's rate limit ('rate:*'), each task's rate
-- limit and cap, and one entry per task with keyed caps ('conc:<task>#*'), its keys
-- counted together. The hash holds no entry per key (a keyed cap's slots and lines are
-- counted in its family's keys: see includes/unhold.lua), so what this costs does not
-- grow with the keys in use; an entry of one key that an earlier version left there is
-- skipped. The hash is read to its end (HSCAN's COUNT is a hint: one page is neither
-- all of it nor bounded), unless it holds more than ARGV[1] entries.
--
-- Reply: {complete, gate...}. complete: 1, or 0 when the hash was not read to its end
-- (over ARGV[1] entries). Each gate is {name, spec, level, waiting, keys}, where level
-- is, for a rate limit, the tokens available now (a decimal string), for a cap the
-- jobs leased now (for a family: on all its keys); waiting: the jobs held back on it
-- (still pending, in their order); keys: a family's keys with a job leased now, -1
-- for any other gate.
-- @include "clock"
local budget = tonumber(ARGV[1])
local reply, seen, read, cursor = {0}, {}, 0, '0'

-- A count's reply: a key of another type (an error reply) counts nothing. (Each
-- command is named where it is called: engine/acl.py reads them from this text.)
local function count(n)
  if type(n) ~= 'number' then return 0 end
  return n
end

local function listed(name, spec)
  local gate = base .. 'gate:' .. name
  local level, keys = 0, -1
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
    level = count(redis.pcall('ZCOUNT', gate, '(' .. fmt(now_ms), '+inf'))
  end
  if string.sub(name, -2) == '#*' then
    keys = count(redis.pcall('HLEN', base .. 'keys:' .. name))
  end
  reply[#reply + 1] = {name, spec, string.format('%.3f', level),
    count(redis.pcall('ZCARD', base .. 'held:' .. name)), keys}
end

repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 100)
  cursor = page[1]
  local fields = page[2]
  for i = 1, #fields, 2 do
    local name = fields[i]
    read = read + 1
    -- (HSCAN may return an entry twice; '#' not before '*' at the end: one key's entry)
    if not seen[name] and (not string.find(name, '#', 1, true) or string.find(name, '^[^#]*#%*$')) then
      seen[name] = true
      listed(name, fields[i + 1])
    end
  end
until cursor == '0' or read >= budget
if cursor == '0' then reply[1] = 1 end
return reply
