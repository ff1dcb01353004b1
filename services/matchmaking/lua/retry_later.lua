-- A failed creation attempt of a claimed table: count it and push its next retry back, only
-- while the table's proposal still exists (another matcher may have finished it meanwhile:
-- HINCRBY would make the key anew, with no expiry).
--
-- KEYS[1]  {mm:G}:proposal:<P>
-- KEYS[2]  {mm:G}:claims
-- ARGV[1]  the proposal id
-- ARGV[2]  now, ms
--
-- Returns the attempts so far, or 0 when the proposal is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[1])
return attempts
