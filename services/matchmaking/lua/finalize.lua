-- The match exists: mark the proposal's tickets matched (with each player's seat and
-- seat token), free the players' open-ticket pointers, drop the claim, and fold the
-- tickets' waits into their pool's average wait (for estimates: one key per pool, since
-- tickets of other options wait for other tables; it expires a while after the pool's last
-- table, as options without a list of choices make a pool per value). A ticket not claimed by
-- this proposal is left alone, so finishing a proposal twice changes nothing, and so is a
-- player's open-ticket pointer to a ticket this call did not mark matched (another claim's, or over).
-- Only this claim is finished, as in release.lua: tickets (and the proposal) carrying another claim
-- token are the same table claimed again since (the same tickets make the same proposal id), whose
-- own matcher finishes it; a late finalize of the first claim left that one without its proposal.
-- KEYS: 1 claims, 2 proposal, 3 the pool's wait (string, ms), 3+1..3+n ticket hashes, then open pointers
-- ARGV: 1 proposal id, 2 now ms, 3 n, 4 ticket retention ms, 5 the wait's ttl ms,
--       5+1..5+n per-ticket fields (json object), then for each open pointer the ticket id it
--       must hold to be deleted, then the claim token ('' matches a claim from before the tokens)
local n = tonumber(ARGV[3])
local token = ARGV[#ARGV]
local done = 0
local waits = 0
local matched_ids = {}
for i = 1, n do
  local key = KEYS[3 + i]
  local st = redis.call('HMGET', key, 'state', 'proposal', 'created_ms', 'id', 'claim')
  if st[1] == 'claimed' and st[2] == ARGV[1] and (st[5] or '') == token then
    local flat = {'state', 'matched', 'closed_ms', ARGV[2]}
    for k, v in pairs(cjson.decode(ARGV[5 + i])) do
      flat[#flat + 1] = k
      flat[#flat + 1] = v
    end
    redis.call('HSET', key, unpack(flat))
    redis.call('PEXPIRE', key, ARGV[4])
    done = done + 1
    matched_ids[st[4]] = true
    waits = waits + (tonumber(ARGV[2]) - tonumber(st[3]))
  end
end
for j = 4 + n, #KEYS do
  local owner = ARGV[5 + n + (j - 3 - n)]
  if matched_ids[owner] and redis.call('GET', KEYS[j]) == owner then
    redis.call('DEL', KEYS[j])
  end
end
local claimed = redis.call('HGET', KEYS[2], 'claim')
if redis.call('EXISTS', KEYS[2]) == 0 or (claimed or '') == token then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[2])
end
if done > 0 then
  local mean = waits / done
  local old = tonumber(redis.call('GET', KEYS[3]))
  if old then
    mean = old * 0.8 + mean * 0.2
  end
  redis.call('SET', KEYS[3], tostring(mean), 'PX', ARGV[5])
end
return done
