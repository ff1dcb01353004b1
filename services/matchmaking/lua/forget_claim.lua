-- Drop the claim of a table whose proposal is gone (finished elsewhere, given up, or expired),
-- only while it is still gone: looked for and removed in one step, so that the same tickets
-- claimed again meanwhile (the same proposal id) keep their claim, and with it their retry.
--
-- KEYS[1]  {mm:G}:proposal:<P>
-- KEYS[2]  {mm:G}:claims
-- ARGV[1]  the proposal id
--
-- Returns 1 when the claim was dropped, 0 when the proposal exists (claimed again).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
return redis.call('ZREM', KEYS[2], ARGV[1])
