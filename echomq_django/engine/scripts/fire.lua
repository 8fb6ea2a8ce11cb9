-- fire: enqueue the jobs of a schedule's due ticks and advance its next fire time.
--
-- KEYS[1] pending    ZSET   KEYS[2] scheduled  ZSET   KEYS[3] seq       STRING
-- KEYS[4] metrics    HASH   KEYS[5] wake       ZSET   KEYS[6] schedules ZSET
-- KEYS[7] schedule  HASH (its record)
--
-- ARGV[1] name, ARGV[2] the next fire time the caller planned from (ms: the fence),
-- ARGV[3] the next fire time after this fire,
-- ARGV[4] how many ticks the caller's catch-up policy gives up (counted as missed),
-- ARGV[5..] the ticks to fire, oldest first.
--
-- The fence makes any number of schedulers fire each tick exactly once: the first call
-- moves the next fire time on, and every other call planned from the same one finds it
-- moved and changes nothing. Each job's id is derived from (queue, schedule, tick), a
-- UUIDv7 whose timestamp is the tick, so a tick is one job even when planned twice (a
-- schedule edited between deploys). The row is the one enqueue stores (store_job).
-- overlap 'skip': while the schedule's last job is pending, scheduled or active, the
-- ticks are skipped (counted), the next fire time still advances.
--
-- Reply: {outcome, fired, skipped, job id...}; outcome 'fired', 'skipped', or, with
-- nothing changed, 'stale' (the fence moved: fired by another scheduler, paused,
-- edited or removed) or 'early' (a tick is ahead of the server clock).
-- Error: EMQSTATE when the schedule's record is not a whole definition (nothing written).
-- @include "moves"
-- @include "schedule"
local name, fence = ARGV[1], tonumber(ARGV[2])
for i = 2, #ARGV do
  if not tonumber(ARGV[i]) then
    return redis.error_reply('ERR fire: ARGV[' .. i .. '] is not a number')
  end
end
local score = redis.call('ZSCORE', KEYS[6], name)
if not score or tonumber(score) ~= fence then
  return {'stale', 0, 0}
end
local n = #ARGV - 4
if fence > now_ms or (n > 0 and tonumber(ARGV[#ARGV]) > now_ms) then
  return {'early', 0, 0}
end
local template = is_row(KEYS[7]) and schedule_template(KEYS[7])
if not template then
  return redis.error_reply('EMQSTATE schedule ' .. name .. ' has no whole definition')
end
local def = redis.call('HMGET', KEYS[7], 'overlap', 'last_job', 'paused', 'orphaned')
if def[3] == '1' or def[4] == '1' then
  return {'stale', 0, 0}  -- a paused or orphaned schedule is never due (its score is +inf)
end

-- (queue, schedule, tick) -> a canonical UUIDv7: the tick's 48 bits of ms, then SHA-1 bits.
local function tick_job_id(tick)
  local h = redis.sha1hex(base .. 'schedule:' .. name .. ':' .. fmt(tick))
  local ms = string.format('%06x%06x', math.floor(tick / 16777216), tick % 16777216)
  local v = tonumber(string.sub(h, 4, 4), 16) % 4 + 1
  local variant = string.sub('89ab', v, v)
  return string.sub(ms, 1, 8) .. '-' .. string.sub(ms, 9, 12) .. '-7' .. string.sub(h, 1, 3)
    .. '-' .. variant .. string.sub(h, 5, 7) .. '-' .. string.sub(h, 8, 19)
end

local ids, skipped, outcome = {}, 0, 'fired'
if n > 0 and def[1] == 'skip' and def[2] and def[2] ~= '' then
  local state = redis.pcall('HGET', row_key(def[2]), 'state')
  if state == 'pending' or state == 'scheduled' or state == 'active' then
    outcome, skipped = 'skipped', n
  end
end
if outcome == 'fired' and n > 0 then
  local seq, corrupt_seq = take_seq(KEYS[3], n)
  if corrupt_seq then return corrupt_seq end
  for i = 5, #ARGV do
    local id = tick_job_id(tonumber(ARGV[i]))
    local jk = row_key(id)
    seq = seq + 1
    if redis.call('EXISTS', jk) == 0 then
      store_schedule_job(template, jk, id, seq, KEYS[1], KEYS[2])
      ids[#ids + 1] = id
    end
  end
  redis.call('HSET', KEYS[7], 'last_tick', ARGV[#ARGV], 'last_fired_at', fmt(now_us))
  if #ids > 0 then
    redis.call('HSET', KEYS[7], 'last_job', ids[#ids])
    wake(KEYS[5])
    bump(KEYS[4], 'enqueued', #ids)
  end
end
-- The fence moves on before the counters, and they are best-effort (bump): a corrupt
-- one (HSET ... fired x) must not leave the jobs enqueued and the fire time where it
-- was, to fire the same ticks again at every pass.
redis.call('ZADD', KEYS[6], ARGV[3], name)
bump(KEYS[7], 'fired', #ids)
bump(KEYS[7], 'missed', tonumber(ARGV[4]))
bump(KEYS[7], 'skipped', skipped)
local reply = {outcome, #ids, skipped}
for _, id in ipairs(ids) do
  reply[#reply + 1] = id
end
return reply
