-- Create a ticket unless its request id was seen or its creator already has an open
-- ticket in this game. A lone player's ticket queues at once; a party ticket waits in
-- `pending` (scored by its answer deadline) until every invitee accepts (accept_invite.lua),
-- and each invitee finds it in their invites set. Invitees' open tickets are checked when
-- they accept, not here. All keys share the game's hash tag {mm:<game>}.
-- KEYS: 1 queue (zset), 2 pending (zset), 3 ticket (hash), 4 request id key,
--       5 the creator's open-ticket pointer, 6.. each invitee's invites set
-- ARGV: 1 ticket id, 2 created ms, 3 ticket key ttl ms, 4 pointer ttl ms, 5 request key ttl ms,
--       6 answer deadline ms ('' = no party: queue now), 7.. field, value pairs of the ticket hash
local existing = redis.call('GET', KEYS[4])
if existing then
  return {'duplicate', existing}
end
local other = redis.call('GET', KEYS[5])
if other then
  return {'busy', other}
end
local fields = {}
for i = 7, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[3], unpack(fields))
redis.call('PEXPIRE', KEYS[3], ARGV[3])
if ARGV[6] == '' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
  for i = 6, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[1])
    if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[3]) then
      redis.call('PEXPIRE', KEYS[i], ARGV[3])
    end
  end
end
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[4])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[5])
return {'created', ARGV[1]}
