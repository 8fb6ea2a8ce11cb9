-- events: append job events to the queue's event stream, kept to about a cap. Not a
-- transition (no job changes place): the log `echomq tail` follows, written by the
-- worker in the round trip that already carries its completions.
--
-- KEYS[1] events STREAM (entry ids are the server's clock, ms)
--
-- ARGV[1] the cap (XADD MAXLEN ~: trimmed in whole nodes, so a little more is kept)
-- ARGV[2] k, the fields per event; ARGV[3 .. 2 + k] their names; then k values per
--         event, events in order.
--
-- Reply: the number of events added. No shebang flags: on a server at maxmemory with
-- noeviction the call is refused (the events are dropped) rather than grow memory.

local k = tonumber(ARGV[2])
local entry = {'MAXLEN', '~', ARGV[1], '*'}
for f = 1, k do
  entry[3 + 2 * f] = ARGV[2 + f]
end
local n = 0
for first = 3 + k, #ARGV, k do
  for f = 1, k do
    entry[4 + 2 * f] = ARGV[first + f - 1]
  end
  redis.call('XADD', KEYS[1], unpack(entry))
  n = n + 1
end
return n
