-- schedule_sync: store a schedule's definition as declared in code (a scheduler's start).
--
-- KEYS[1] schedules  ZSET   KEYS[2] schedule  HASH (its record)
-- ARGV[1] name, ARGV[2] the definition's digest, ARGV[3] its next fire time (ms: see
-- scheduler.replan), ARGV[4] the next fire time the caller planned from (its score as
-- read, '' for none: the fence), ARGV[5] the stored timing's due ticks an edit gives up
-- (counted as missed), ARGV[6..] the definition's field/value pairs.
--
-- Reply: 'unchanged' (same digest, nothing written: the fire record and next fire time
-- stand, so restarts and redeploys never shift or repeat a tick), 'created', 'edited' (the
-- definition and the next fire time replaced, ARGV[5] added to missed; the fire record
-- kept), 'restored' (an orphaned schedule declared again), or 'retry' (the schedule fired,
-- or was paused or resumed, since the caller read it: nothing written, plan again). A
-- paused schedule stays paused. Error: WRONGTYPE for a key of another type at the hash,
-- before any write.
-- @include "clock"
local name, digest, next_ms = ARGV[1], ARGV[2], ARGV[3]
if not (redis.call('TYPE', KEYS[2])['ok'] == 'none' or is_row(KEYS[2])) then
  return redis.error_reply('WRONGTYPE schedule ' .. name .. ' is not a hash')
end
local old = redis.call('HMGET', KEYS[2], 'digest', 'paused', 'orphaned', 'last_tick')
local outcome = 'created'
if old[1] == digest and old[3] ~= '1' then
  return 'unchanged'
elseif old[1] == digest then
  outcome = 'restored'
elseif old[1] then
  outcome = 'edited'
end
if (redis.call('ZSCORE', KEYS[1], name) or '') ~= ARGV[4]
    or tonumber(next_ms) <= (tonumber(old[4]) or -1) then
  return 'retry'
end
for i = 6, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[2], 'name', name, 'digest', digest, 'orphaned', 0, 'synced_at', fmt(now_us))
if outcome == 'created' then
  redis.call('HSET', KEYS[2], 'paused', 0, 'fired', 0, 'missed', 0, 'skipped', 0)
end
redis.call('ZADD', KEYS[1], old[2] == '1' and '+inf' or next_ms, name)
if outcome == 'edited' then
  bump(KEYS[2], 'missed', tonumber(ARGV[5]))
end
return outcome
