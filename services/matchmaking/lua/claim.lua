-- Claim a proposed table: all of its tickets or none. A ticket is claimed only while it
-- is searching, so however many matchers propose overlapping tables, each ticket joins
-- at most one of them. Claimed tickets leave the queue; the proposal is recorded so a
-- crashed matcher's claim is finished by another (claims zset, scored by claim time).
-- The tickets live as long as the proposal: a table is retried until CreateMatch answers,
-- and its match must still find the tickets that hold its seats however long that took.
-- So do their players' open-ticket pointers: a pointer that ran out while its table waited
-- let its player open a second ticket in the game, one the coming match would never seat.
-- Each claim writes its own token on the proposal and its tickets: the same tickets claimed
-- again share the proposal id, and a late release of the first claim must not undo the next.
-- The claim's score in the claims zset is when it may be retried (any replica reads the same, whatever
-- its own `claim_retry_ms`): the claim time and the claim retry, or later while the CreateMatch its
-- matcher is about to ask may still be out (its deadline).
-- KEYS: 1 queue, 2 claims (zset), 3 proposal (hash), 3+1..3+n ticket hashes, then open pointers
-- ARGV: 1 proposal id, 2 now ms, 3 proposal json, 4 proposal (and ticket) key ttl ms, 5 n,
--       5+1..5+n ticket ids (order of the ticket KEYS), then for each open pointer its ticket id,
--       then the claim's score (its retry's due time, ms), then the claim token
local n = tonumber(ARGV[5])
local token = ARGV[#ARGV]
local score = ARGV[#ARGV - 1]
for i = 1, n do
  if redis.call('HGET', KEYS[3 + i], 'state') ~= 'searching' then
    return {0, ARGV[5 + i]}
  end
end
for i = 1, n do
  redis.call('HSET', KEYS[3 + i], 'state', 'claimed', 'proposal', ARGV[1], 'claimed_ms', ARGV[2], 'claim', token)
  redis.call('PEXPIRE', KEYS[3 + i], ARGV[4])
  redis.call('ZREM', KEYS[1], ARGV[5 + i])
end
for j = 4 + n, #KEYS do
  if redis.call('GET', KEYS[j]) == ARGV[5 + n + (j - 3 - n)] then
    redis.call('PEXPIRE', KEYS[j], ARGV[4])
  end
end
redis.call('HSET', KEYS[3], 'plan', ARGV[3], 'claimed_ms', ARGV[2], 'attempts', '0', 'claim', token)
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[2], score, ARGV[1])
return {1, ''}
