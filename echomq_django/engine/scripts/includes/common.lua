-- Shared helpers, inlined by `-- @include "common"`. No TIME here: a read-only
-- script (page) must not call it; the clock is "clock".
--
-- The queue's base prefix ('emq:{q}:') is derived from KEYS[1], so every key a
-- script builds (job rows, per-minute throughput) carries the queue's hash tag
-- and lives on the same cluster slot as the declared KEYS.
local base = string.match(KEYS[1], '^(.*:)[a-z]+$')

-- Integers go to the server as '%d' strings: Lua's default number format
-- ('%.14g') would round a 16-digit score or timestamp.
local function fmt(n)
  return string.format('%d', n)
end

-- Bookkeeping is best-effort. A script's real writes (a job's moves, its row) come
-- first or are checked first; a counter or a wake-up after them must never fail the
-- script halfway (Redis rolls nothing back: the moves stay, the caller sees an error
-- and retries, a claim leases its jobs for nothing). So every counter goes through
-- `bump`, in a pcall: a field that is not an integer, or a key of another type at
-- the metrics (or a schedule's) name, loses the count and nothing else.
-- Returns the new value, or nil when the counter is corrupt.
local function bump(key, field, n)
  local v = redis.pcall('HINCRBY', key, field, n or 1)
  if type(v) == 'number' then return v end
  return nil
end

-- A whole number read from a row, or `default` when it is not one within lo..hi: Lua's
-- tonumber reads 'inf', 'nan' and '1e300' as numbers, and '%d' of them is -2^63 (a
-- job due, or trimmed, at once). Every number a script reads from a row goes through here.
local function int_in(v, lo, hi, default)
  local n = tonumber(v)
  if not n or n ~= n or n < lo or n > hi then return default end
  return math.floor(n)
end

local function row_key(id)
  return base .. 'job:' .. id
end

-- A row exists and is a HASH. A key of another type planted at a row's name
-- would make the next HGET/HSET fail halfway through a script, after its
-- first writes (Redis does not roll them back): check before touching it.
local function is_row(jk)
  return redis.call('TYPE', jk)['ok'] == 'hash'
end

-- The error a caller reads as CorruptKey: `key` holds `what` (a planted key, a typo).
-- A script finds it before its first write, as script.py's guard does for the places: a
-- WRONGTYPE from a later command would name no key, and might come after writes Redis
-- does not roll back.
local function corrupt(key, what)
  return redis.error_reply('EMQCORRUPT ' .. key .. ' holds ' .. what
    .. ': nothing was stored or moved; repair or delete the key')
end

-- That error when `key` holds another type than `wanted`, or nil: it is one, or none.
local function foreign(key, wanted)
  local kind = redis.call('TYPE', key)['ok']
  if kind == wanted or kind == 'none' then return nil end
  return corrupt(key, 'a ' .. kind .. ', not a ' .. wanted)
end

-- `n` numbers of the queue's sequence (`key`, a STRING): the one before the first, or
-- nil and the CorruptKey error when the key is no whole number, found before any write
-- (an INCRBY on it fails naming nothing). `later`: read only, the caller INCRBYs `n` once
-- it has stored a job, so a call that stores none leaves the sequence as it was.
local function take_seq(key, n, later)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return nil, foreign(key, 'string') end
  if v and not (#v <= 15 and string.find(v, '^%d+$')) then
    return nil, corrupt(key, 'a string that is no sequence number')
  end
  if later then return tonumber(v or '0') end
  return redis.call('INCRBY', key, n) - n
end

-- A canonical lowercase UUIDv7, as keyspace.validate_job_id accepts. A member
-- planted in a place under any other name must never reach a worker: every
-- later call on it (complete, retry, extend) would be refused as a bad id.
-- One literal, not built with string.rep and '..': this line runs on every call of every script.
local JOB_ID = '^[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]%-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]%-7[0-9a-f][0-9a-f][0-9a-f]%-[89ab][0-9a-f][0-9a-f][0-9a-f]%-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]$'
local function is_job_id(id)
  return string.find(id, JOB_ID) ~= nil
end

-- Priority (-100..100, higher first) and a per-queue sequence (FIFO within one
-- priority) packed into one exact double: (100 - priority) * 2^45 + seq stays
-- below 2^53 for 35 trillion jobs per queue.
local function pending_score(priority, seq)
  local p = tonumber(priority) or 0
  if p > 100 then p = 100 elseif p < -100 then p = -100 end
  return (100 - p) * 35184372088832 + seq
end

-- Errors are a JSON array kept opaque to Lua (cjson would round big integers
-- and turn empty arrays into objects): each entry arrives already encoded.
--
-- Bounded: the row keeps the newest errors within ERRORS_MAX bytes and counts the
-- ones it dropped in 'errors_dropped' (each record is bounded by the worker:
-- outcome.py), so a task failing with huge messages, many times, cannot grow its
-- row (and the time of this script) without end. An entry starts with
-- '{"exception_class_path":' (outcome.error_json writes that key first; JSON escapes
-- any quote inside a string), which is where the oldest one is cut off.
--
-- Each entry is stamped with when it was recorded (the server's clock, "at_us") and
-- on whose lease (the row's holder, "worker", when it is one a row can name): the
-- keys go last, so an entry still starts with its class path.
local ERRORS_MAX = ${ROW_ERRORS_MAX_BYTES}
local function stamped_error(error_json, worker, at_us)
  local stamp = '"at_us":' .. string.format('%d', at_us)
  if worker and worker ~= '' and #worker <= 200 and not string.find(worker, '[%c%s"\\]') then
    stamp = stamp .. ',"worker":"' .. worker .. '"'
  end
  if string.sub(error_json, -1) ~= '}' then return error_json end  -- (trailing blanks): as is
  if string.find(error_json, '^%s*{%s*}$') then return '{' .. stamp .. '}' end
  return string.sub(error_json, 1, -2) .. ',' .. stamp .. '}'
end

local ENTRY = ',{"exception_class_path":'
local function append_error(jk, error_json, summary, at_us)
  local row = redis.call('HMGET', jk, 'errors', 'errors_dropped', 'worker')
  local errors, dropped = row[1], 0
  error_json = stamped_error(error_json, row[3], at_us)
  local first = not errors or errors == '' or errors == '[]'
  if first then
    errors = '[' .. error_json .. ']'
  else
    errors = string.sub(errors, 1, -2) .. ',' .. error_json .. ']'
  end
  if not first and #errors > ERRORS_MAX then
    -- The oldest entries go: the cut is the first entry start that leaves the rest
    -- within the bound, found in one pass (the row may be far over it: written before
    -- the bound, or planted), and the entries before it are counted in the same pass.
    -- Entries of another shape cannot be told apart: all of them count as one.
    local keep_from = #errors + 1 - ERRORS_MAX
    local cut = string.find(errors, ENTRY, keep_from, true)
    local last = cut or (#errors - #error_json - 1)  -- none fits: keep the new one alone
    dropped = 1
    local at = string.find(errors, ENTRY, 2, true)
    while at and at < last do
      dropped = dropped + 1
      at = string.find(errors, ENTRY, at + 1, true)
    end
    if cut then
      errors = '[' .. string.sub(errors, cut + 1)
    else
      errors = '[' .. error_json .. ']'
    end
  end
  redis.call('HSET', jk, 'errors', errors, 'last_error', summary)
  if dropped > 0 then
    redis.call('HSET', jk, 'errors_dropped', fmt(int_in(row[2], 0, 2^53, 0) + dropped))
  end
end

-- An idempotency key is held only while its job is pending, scheduled or active.
-- The row keeps the key's digest, never a key name: the key is rebuilt from
-- `base`, so a script touches only keys of its own queue (declared keys). It runs
-- after the job's moves: pcall, so a key of another type there cannot fail them halfway.
-- `digest`: the row's 'idem' when the caller has read it already.
local function release_idempotency(jk, id, digest)
  if digest == nil then
    digest = redis.call('HGET', jk, 'idem')
  end
  if digest and digest ~= '' then
    local idem = base .. 'idem:' .. digest
    if redis.pcall('GET', idem) == id then
      redis.call('DEL', idem)
    end
  end
end

-- A dead job revived takes its key again. When a job enqueued since holds it, the
-- revival is refused (two live jobs must never share one key): the holder's id is
-- returned and nothing is written. nil: the key is this job's now (or it has none).
-- SET NX and pcall: never stolen from a live job, no WRONGTYPE on a planted key.
local function hold_idempotency(jk, id)
  local digest = redis.call('HGET', jk, 'idem')
  if digest and digest ~= '' then
    local idem = base .. 'idem:' .. digest
    local holder = redis.pcall('GET', idem)
    if type(holder) == 'string' and holder ~= id then return holder end
    redis.call('SET', idem, id, 'NX')
  end
  return nil
end

-- The fence across a job id's lives. Ids may be the caller's, so an id can be
-- enqueued again after its row was deleted or trimmed, while a zombie still holds a
-- token of the old row. 'tokens' (a STRING of the queue) is the highest token of any
-- row removed from the queue; a new row's attempts start there (its refunds too, so
-- what it is charged still starts at 0): a token is never handed out twice for an id.
local token_floor_now
local function token_floor()
  if token_floor_now == nil then
    token_floor_now = tonumber(redis.pcall('GET', base .. 'tokens')) or 0
  end
  return token_floor_now
end

local function raise_token_floor(jk)
  local attempts = tonumber(redis.call('HGET', jk, 'attempts')) or 0
  if attempts > token_floor() then
    token_floor_now = attempts
    redis.call('SET', base .. 'tokens', fmt(attempts))
  end
end

local function used_attempts(jk)
  local row = redis.call('HMGET', jk, 'attempts', 'refunds', 'max_attempts')
  return int_in(row[1], 0, 2^53, 0) - int_in(row[2], 0, 2^53, 0),
    int_in(row[3], 1, ${MAX_ATTEMPTS}, 1)
end
