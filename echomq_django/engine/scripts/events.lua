-- events: append a batch of job events to the queue's event stream, kept to about a cap.
-- Not a transition (no job changes place): the log `echomq tail` follows, written by the
-- worker in the round trip that already carries its completions.
--
-- KEYS[1] events STREAM (entry ids are the server's clock, ms)
--
-- ARGV[1] the cap in entries (XADD MAXLEN ~: trimmed in whole nodes, a little more kept)
-- ARGV[2] the field names of an event, comma-separated
-- ARGV[3] the events: a JSON array of arrays of those fields' values, opaque to Lua
--
-- One entry per call, whatever the number of events in it: the server's cost stays
-- that of one XADD per round trip. Reply: the entry's id. No shebang flags: on a
-- server at maxmemory with noeviction the call is refused (the events are dropped)
-- rather than grow memory.

return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'fields', ARGV[2],
  'events', ARGV[3])
