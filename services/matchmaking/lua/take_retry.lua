-- Take a stale claim's retry: push its next retry back (by the claim retry, or later while the
-- CreateMatch the caller is about to ask may still be out: its deadline) before asking CreateMatch again,
-- only while the claim is still stale, its proposal still exists and still carries the claim
-- token of the plan the caller read. Every matcher replica reads the same stale claims:
-- without this, each one asked a slow CreateMatch again on each pass after the claim went stale
-- (every `claim_retry_ms` and more). The one that moves the score asks; the others find it fresh
-- and leave it to that one. A caller whose plan was read before the table was given up and its
-- tickets claimed again (the same proposal id, another token) would ask with the old plan and
-- finish the newer claim with it: it leaves that claim to its own matcher.
--
-- KEYS[1]  {mm:G}:proposal:<P>
-- KEYS[2]  {mm:G}:claims
-- ARGV[1]  the proposal id
-- ARGV[2]  now, ms: the claim is stale when its score (when its retry is due) is at most this
-- ARGV[3]  the claim's new score, ms: when its next retry is due (now + claim_retry_ms, or the
--          deadline of the CreateMatch the caller is about to ask, and a margin, when that is later)
-- ARGV[4]  the claim token of the caller's plan ('' matches a claim from before the tokens)
--
-- Returns 1 when this caller took the retry, 0 otherwise (not stale any more, gone, or another claim).
if redis.call('EXISTS', KEYS[1]) == 0 or (redis.call('HGET', KEYS[1], 'claim') or '') ~= (ARGV[4] or '') then
  return 0
end
local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not due or tonumber(due) > tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', ARGV[3], ARGV[1])
return 1
