-- compare-and-set, from the seed (000, §2): write only if the value still matches.
--
-- The GET, the comparison and the SET are one atomic step: the SET is conditioned
-- on a value still current at the instant it is written.
--
-- KEYS[1] the key   ARGV[1] expected value   ARGV[2] new value
-- Reply: 1 when it matched and the SET ran; 0 when the value changed or the key is absent.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
