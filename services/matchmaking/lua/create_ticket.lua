-- Queue a ticket unless its request id was seen or one of its players already has an
-- open ticket in this game. All keys share the game's hash tag {mm:<game>}.
-- KEYS: 1 queue (zset), 2 ticket (hash), 3 request id key, 4.. each player's open-ticket pointer
-- ARGV: 1 ticket id, 2 created ms, 3 ticket key ttl ms, 4 pointer ttl ms, 5 request key ttl ms,
--       6.. field, value pairs of the ticket hash
local existing = redis.call('GET', KEYS[3])
if existing then
  return {'duplicate', existing}
end
for i = 4, #KEYS do
  local other = redis.call('GET', KEYS[i])
  if other then
    return {'busy', other, tostring(i - 3)}
  end
end
local fields = {}
for i = 6, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
for i = 4, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[4])
end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[5])
return {'created', ARGV[1]}
