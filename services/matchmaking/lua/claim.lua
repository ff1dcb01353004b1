-- Claim a proposed table: all of its tickets or none. A ticket is claimed only while it
-- is searching, so however many matchers propose overlapping tables, each ticket joins
-- at most one of them. Claimed tickets leave the queue; the proposal is recorded so a
-- crashed matcher's claim is finished by another (claims zset, scored by claim time).
-- The tickets live as long as the proposal: a table is retried until CreateMatch answers,
-- and its match must still find the tickets that hold its seats however long that took.
-- KEYS: 1 queue, 2 claims (zset), 3 proposal (hash), 4.. ticket hashes
-- ARGV: 1 proposal id, 2 now ms, 3 proposal json, 4 proposal (and ticket) key ttl ms, 5.. ticket ids (order of KEYS[4..])
for i = 4, #KEYS do
  if redis.call('HGET', KEYS[i], 'state') ~= 'searching' then
    return {0, ARGV[i + 1]}
  end
end
for i = 4, #KEYS do
  redis.call('HSET', KEYS[i], 'state', 'claimed', 'proposal', ARGV[1], 'claimed_ms', ARGV[2])
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
  redis.call('ZREM', KEYS[1], ARGV[i + 1])
end
redis.call('HSET', KEYS[3], 'plan', ARGV[3], 'claimed_ms', ARGV[2], 'attempts', '0')
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return {1, ''}
