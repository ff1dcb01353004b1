-- An invited player joins a pending party ticket: their open-ticket pointer is set (one
-- open ticket per player per game, as for a ticket of their own) and they leave the
-- awaiting list. The last acceptance queues the ticket: its wait and lifetime start now.
-- KEYS: 1 queue, 2 pending, 3 ticket, 4 the member's invites set, 5 the member's pointer,
--       6.. every player's pointer (re-timed when the ticket queues)
-- ARGV: 1 ticket id, 2 member, 3 now ms, 4 pointer ttl while pending (ms),
--       5 ticket lifetime once queued (ms), 6 retention ms, 7 pointer margin ms
local st = redis.call('HMGET', KEYS[3], 'state', 'awaiting', 'expires_ms')
if not st[1] then
  return {'missing', ''}
end
if st[1] ~= 'pending' then
  return {'state', st[1]}
end
if tonumber(st[3]) <= tonumber(ARGV[3]) then
  return {'state', 'expired'}  -- too late; the matcher ends it on its next pass
end
local awaiting = cjson.decode(st[2] or '[]')
local left = {}
local found = false
for _, p in ipairs(awaiting) do
  if p == ARGV[2] then
    found = true
  else
    left[#left + 1] = p
  end
end
if not found then
  return {'state', 'pending'}
end
local other = redis.call('GET', KEYS[5])
if other and other ~= ARGV[1] then
  return {'busy', other}
end
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[4])
redis.call('SREM', KEYS[4], ARGV[1])
-- The member's wish starts now: a table they sat at before this is no reason to drop the ticket.
redis.call('HSET', KEYS[3], 'accepted:' .. ARGV[2], ARGV[3])
if #left > 0 then
  redis.call('HSET', KEYS[3], 'awaiting', cjson.encode(left))
  return {'accepted', ''}
end
local now = tonumber(ARGV[3])
local lifetime = tonumber(ARGV[5])
redis.call('HSET', KEYS[3], 'state', 'searching', 'awaiting', '[]', 'created_ms', ARGV[3],
  'expires_ms', tostring(now + lifetime))
redis.call('PEXPIRE', KEYS[3], lifetime + tonumber(ARGV[6]))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
for i = 6, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], lifetime + tonumber(ARGV[7]))
  end
end
return {'queued', ''}
