-- Flow control, inlined by `-- @include "limits"`.
-- @include "moves"
-- @include "unhold"
--
-- A row's `limits` field lists the gates its job must pass to be claimed, separated
-- by spaces (engine/limits.py writes them; enqueue stores them, never a worker):
--   rate:<scope>/<n>/<per_ms>/<burst>   at most n starts per per_ms on average, at
--                                       most burst at once (GCRA on the server clock)
--   conc:<scope>/<n>                    at most n leased at once
-- The part before '/' is the gate's name. Every key below is built from `base`, so
-- a limit lives in its queue's slot (declared keys, cluster-safe); a limit is per queue.
--   emq:{q}:gate:<name>   rate: STRING, the theoretical arrival time (µs);
--                         conc: ZSET, the leased job ids scored by lease deadline (ms):
--                         a slot of a crashed worker frees itself when its lease ends
--   emq:{q}:held:<name>   ZSET, the jobs waiting on this gate, by their pending score
--                         (state 'pending', row field `held` = the name)
--   emq:{q}:gates         ZSET, the names of gates with held jobs, scored by when the
--                         gate may admit again (ms); 0: now (a slot was freed)
--   emq:{q}:limits        HASH, name -> its spec as last enqueued (store_job.lua), or
--                         claimed: the rule every job of the gate follows, whatever
--                         its row says; for the admin, stats and the gates' reads.
--                         A keyed cap (one gate per key: a row keeps its own rule) has
--                         no entry of its own: its task's family has one,
--                         'conc:<task>#*' -> its last enqueued rule, and the family's
--                         keys count its keys' slots and lines (see unhold.lua), so the
--                         hash holds one entry per gate of a task, never one per key
-- Every command on these keys is a pcall: claim reaches them after its first moves
-- (promote_due, a job popped), and a key of another type planted at one must not fail
-- it halfway (a popped job in no place). A gate whose key is corrupt admits (its rate
-- or cap is not enforced) rather than lose or strand a job; a rate gate's SET repairs
-- its key.
local GATES, LIMITS, WAKE = base .. 'gates', base .. 'limits', base .. 'wake'

local function gate_parse(spec)
  local name, rest = string.match(spec, '^([^/]+)/(.*)$')
  if not name then return nil end
  local kind = string.sub(name, 1, 5)
  local n, per, burst = string.match(rest, '^(%d+)/?(%d*)/?(%d*)$')
  n = tonumber(n)
  if not n or n < 1 then return nil end
  if kind == 'rate:' then
    per, burst = tonumber(per), tonumber(burst)
    if not per or per < 1 or not burst or burst < 1 then return nil end
    return {name = name, spec = spec, rate = true, interval = per * 1000 / n, burst = burst}
  elseif kind == 'conc:' then
    local family, digest = gate_family(name)
    return {name = name, spec = spec, cap = n, family = family, digest = digest}
  end
end

-- Store a rate gate's theoretical arrival time (µs); it expires once a full burst is back.
local function rate_set(g, tat)
  redis.call('SET', base .. 'gate:' .. g.name, string.format('%.17g', tat),
    'PX', fmt(math.ceil(g.interval * g.burst / 1000) + 1000))
end

-- A rate gate's theoretical arrival time (µs), as its rule stands now. Under one rule it
-- never runs more than `burst` intervals ahead; a state left by a slower rule (a limit
-- raised by a deploy: an hour ahead for 1/h) is cut to that and stored, so the raised
-- limit holds from now on: its next token comes one of its own intervals later.
local function rate_tat(g)
  local tat = tonumber(redis.pcall('GET', base .. 'gate:' .. g.name)) or 0
  local most = now_us + g.burst * g.interval
  if tat > most then
    rate_set(g, most)
    return most
  end
  return math.max(tat, now_us)
end

-- How many jobs the gate admits now, and (when none) the ms it next may.
local function gate_room(g)
  local key = base .. 'gate:' .. g.name
  if g.rate then
    local tat = rate_tat(g)
    local slack = (g.burst - 1) * g.interval - (tat - now_us)
    if slack < -1 then  -- 1 µs of float tolerance
      return 0, math.ceil((tat - (g.burst - 1) * g.interval) / 1000)
    end
    return math.floor((slack + 1) / g.interval) + 1, now_ms
  end
  -- expired leases free their slots
  if type(redis.pcall('ZREMRANGEBYSCORE', key, '-inf', fmt(now_ms))) ~= 'number' then
    return g.cap, now_ms  -- a key of another type: it admits (see above)
  end
  local room = g.cap - redis.call('ZCARD', key)
  if room > 0 then return room, now_ms end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return 0, (tonumber(first[2]) or now_ms) + 1
end

-- The job passes the gate: a token spent, or a slot held until `deadline`.
local function gate_take(g, id, deadline)
  local key = base .. 'gate:' .. g.name
  if g.rate then
    rate_set(g, rate_tat(g) + g.interval)
  else
    redis.pcall('ZADD', key, fmt(deadline), id)
  end
  if g.family then  -- a keyed cap: its slot counts in its task's family, its key is in use
    redis.pcall('ZADD', base .. 'gate:' .. g.family, fmt(deadline), id)
    redis.pcall('HSET', base .. 'keys:' .. g.family, g.digest, g.spec)
  elseif not g.stored then  -- a rule not announced yet: the admin lists it
    redis.pcall('HSET', LIMITS, g.name, g.spec)
  end
end

-- The gate as its rule stands now: the last enqueued job's (the `limits` hash), or the
-- row's own when the hash has none for it, or it is keyed ('#'), or unreadable.
local current = {}
local function gate_current(g)
  if string.find(g.name, '#', 1, true) then return g end
  local now = current[g.name]
  if now == nil then
    local spec = redis.pcall('HGET', LIMITS, g.name)
    now = type(spec) == 'string' and gate_parse(spec)
    if not now or now.name ~= g.name then now = false else now.stored = true end
    current[g.name] = now
  end
  return now or g
end

-- The gates of a row's `limits` (unparsable entries are skipped: enqueue validated them),
-- each as its rule stands now.
local function gates_of(limits)
  local out = {}
  for spec in string.gmatch(limits, '%S+') do
    local g = gate_parse(spec)
    if g then out[#out + 1] = gate_current(g) end
  end
  return out
end

-- The first gate that refuses the job now, and when it next may admit; nil: all admit.
local function gate_refusal(gates)
  for _, g in ipairs(gates) do
    local room, due = gate_room(g)
    if room < 1 then return g, due end
  end
  return nil
end

-- Park a popped pending job on the gate that refused it: it keeps its score (its place
-- in line) and its state, and the gate is scored by when it may admit again.
-- false: the gate's line (or the index of lines) is a key of another type, and the job
-- was not parked: the claim leases it instead (see above), never drops it.
local function gate_hold(jk, id, score, g, due)
  if type(redis.pcall('ZADD', GATES, fmt(due), g.name)) ~= 'number' then return false end
  if type(redis.pcall('ZADD', base .. 'held:' .. g.name, score, id)) ~= 'number' then
    return false
  end
  if g.family then redis.pcall('ZADD', base .. 'held:' .. g.family, score, id) end
  redis.call('HSET', jk, 'held', g.name)
  return true
end

-- The rule of a gate with held jobs: the `limits` hash's; a keyed cap's, its key's while
-- it holds a slot, else its task's last enqueued cap (the claim checks each job it pops
-- against its row's own rule again). nil: none readable (the line opens: see below).
local function gate_rule(name)
  local family, digest = gate_family(name)
  local spec
  if not family then
    spec = redis.pcall('HGET', LIMITS, name)
  else
    spec = redis.pcall('HGET', base .. 'keys:' .. family, digest)
    if type(spec) ~= 'string' then
      local rule = redis.pcall('HGET', LIMITS, family)
      local cap = type(rule) == 'string' and string.match(rule, '^[^/]*/(%d+)$')
      spec = cap and (name .. '/' .. cap)
    end
  end
  local g = type(spec) == 'string' and gate_parse(spec)
  if g and g.name == name then return g end  -- (a planted rule of another gate: none)
  return nil
end

-- Gates that may admit now give back up to `count` held jobs to pending (their old
-- scores: the front of the line), where this claim pops them and checks them again.
-- Returns whether any gate has held jobs (the claim then reports the next gate's time).
local function gates_open(pending_key, count)
  -- pcall: claim reads the gates after promote_due's moves; a key of another type
  -- there reads as no gate with held jobs, never fails the claim halfway.
  local list = redis.pcall('ZRANGE', GATES, 0, 9, 'WITHSCORES')
  if list.err then return false end
  for i = 1, #list, 2 do
    local name = list[i]
    if tonumber(list[i + 1]) > now_ms then break end
    local held = base .. 'held:' .. name
    local g = gate_rule(name)
    local room, due = count, now_ms
    if g then room, due = gate_room(g) end
    if room > count then room = count end
    if room > 0 then
      local popped = redis.pcall('ZPOPMIN', held, room)
      if popped.err then popped = {} end
      local family = gate_family(name)  -- a keyed cap: out of its task's line too
      for j = 1, #popped, 2 do
        redis.call('ZADD', pending_key, popped[j + 1], popped[j])
        redis.call('HDEL', row_key(popped[j]), 'held')
        if family then redis.pcall('ZREM', base .. 'held:' .. family, popped[j]) end
      end
      -- When it may admit again once this claim took the jobs moved (they are checked
      -- again when popped): a rate limit's next token; a cap frees a slot when a lease
      -- ends (that script reopens it at once; a lost lease is seen within 1 s).
      due = now_ms + 1000
      if room == count then
        due = now_ms + 1
      elseif g and g.rate then
        due = math.ceil((rate_tat(g) + (#popped / 2) * g.interval - (g.burst - 1) * g.interval) / 1000)
      end
    end
    local left = redis.pcall('ZCARD', held)
    if type(left) ~= 'number' or left == 0 then  -- (a line of another type: no jobs in it)
      redis.call('ZREM', GATES, name)
    else
      redis.call('ZADD', GATES, fmt(due), name)
    end
  end
  return #list > 0
end

-- When the first gate with held jobs may admit again (ms), or nil.
local function gates_next()
  local first = redis.pcall('ZRANGE', GATES, 0, 0, 'WITHSCORES')  -- see gates_open
  return tonumber(first[2])
end

-- A lease ends (complete, retry, release, reap, crash, cancel, delete): its slots free,
-- and a gate with jobs waiting on one opens at once (an idle worker is woken).
-- Bookkeeping after the job's moves, so pcalls (like bump and wake): a gate's key of
-- another type holds no slot to free, and must not fail the lease's end halfway.
local function gates_free(id, limits)
  if not limits or limits == '' then return end
  for spec in string.gmatch(limits, '%S+') do
    local name = string.match(spec, '^(conc:[^/]+)/')
    if name then
      local key = base .. 'gate:' .. name
      redis.pcall('ZREM', key, id)
      local family, digest = gate_family(name)
      if family then redis.pcall('ZREM', base .. 'gate:' .. family, id) end
      if redis.pcall('ZADD', GATES, 'XX', 'CH', 0, name) == 1 then
        wake(WAKE)
      end
      if family and redis.pcall('ZCARD', key) == 0 then  -- a key gone idle: no trace kept
        redis.pcall('HDEL', base .. 'keys:' .. family, digest)
        redis.pcall('HDEL', LIMITS, name)  -- (where earlier versions kept a key's rule)
      end
    end
  end
end

-- A lease about to be renewed: the concurrency slots it lost, if the cap has room for
-- them again. A slot is scored by its lease's deadline, so only a lease that ran out
-- (`last`, the row's lease_deadline, is not after now) can have lost one: a claim's
-- gate_room dropped it, and may have admitted another job in its place. Renewed as
-- is, that lease would run on holding no slot (`ZADD XX` adds none): the cap one over.
-- Reads only, before extend's first write: returns an EMQSTALE error (the lease is
-- lost, as the fence says it; nothing is written, the reaper sweeps the job) when a
-- lost slot's cap is full now, else nil and the gates whose slot is to be taken again
-- (nil: none lost). A live lease, and a job without limits, pay nothing more; a gate
-- key of another type is taken as held (it admits: see above).
local function gates_lost(id, limits, last)
  if not limits or limits == '' then return nil end
  last = tonumber(last)
  if last and last > now_ms then return nil end
  local lost
  for spec in string.gmatch(limits, '%S+') do
    local g = string.sub(spec, 1, 5) == 'conc:' and gate_parse(spec)
    if g then
      g = gate_current(g)
      local key = base .. 'gate:' .. g.name
      if redis.pcall('ZSCORE', key, id) == false then  -- (nil reply: no slot)
        -- the slots still held: those whose lease has not run out (as gate_room counts)
        local live = redis.pcall('ZCOUNT', key, '(' .. fmt(now_ms), '+inf')
        if type(live) == 'number' and live >= g.cap then
          return redis.error_reply('EMQSTALE extend: the lease ran out and its slot of '
            .. g.name .. ' was given to another job')
        end
        lost = lost or {}
        lost[g.name] = g
      end
    end
  end
  return nil, lost
end

-- A lease renewed: its slots stay held until the new deadline; the slots it lost
-- (gates_lost) are taken again, counted in their caps.
local function gates_extend(id, limits, deadline, lost)
  if not limits or limits == '' then return end
  for spec in string.gmatch(limits, '%S+') do
    local name = string.match(spec, '^(conc:[^/]+)/')
    if name then
      local g = lost and lost[name]
      if g then
        gate_take(g, id, deadline)
      else
        redis.pcall('ZADD', base .. 'gate:' .. name, 'XX', fmt(deadline), id)  -- see gates_free
        local family = gate_family(name)
        if family then redis.pcall('ZADD', base .. 'gate:' .. family, 'XX', fmt(deadline), id) end
      end
    end
  end
end
