-- A failed creation attempt of a claimed table: count it and push its next retry back, only
-- while the table's proposal still exists (another matcher may have finished it meanwhile:
-- HINCRBY would make the key anew, with no expiry) and still carries this claim's token (the
-- same tickets claimed again since make the same proposal id: that claim's attempts and retry
-- are its own matcher's to count). The table is never given up here: the failed CreateMatch
-- may have made the match, which only a retry with its request id finds.
-- The retry moves only while the claim's score is still the one the caller wrote (its claim, or
-- the retry it took): a caller stalled past its CreateMatch's deadline may find another replica's
-- taken retry there, whose call is out, and moving it back to "now" let a third replica ask too.
-- Not ZADD GT: a fast failure must bring the retry forward from the deadline it waited out.
--
-- KEYS[1]  {mm:G}:proposal:<P>
-- KEYS[2]  {mm:G}:claims
-- ARGV[1]  the proposal id
-- ARGV[2]  when the next retry is due, ms (now + claim_retry_ms)
-- ARGV[3]  attempts after which retries slow down (0: never)
-- ARGV[4]  how much later each retry comes then, ms
-- ARGV[5]  the claim token ('' matches a claim from before the tokens)
-- ARGV[6]  the score the caller wrote ('' or absent: any)
--
-- Returns the attempts so far, or 0 when the proposal is gone or another claim's.
if redis.call('EXISTS', KEYS[1]) == 0 or (redis.call('HGET', KEYS[1], 'claim') or '') ~= (ARGV[5] or '') then
  return 0
end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
local written = ARGV[6] or ''
if written ~= '' and tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '-1') ~= tonumber(written) then
  return attempts
end
local due = tonumber(ARGV[2])
local slow_after = tonumber(ARGV[3] or '0')
if slow_after > 0 and attempts >= slow_after then
  due = due + tonumber(ARGV[4] or '0')
end
redis.call('ZADD', KEYS[2], 'XX', due, ARGV[1])
return attempts
