-- End a searching ticket (cancelled by its player, or expired). A claimed ticket is
-- already on its way to a table and cannot be ended here: that is what makes a
-- cancellation racing the matcher safe (one of the two wins, atomically).
-- KEYS: 1 queue, 2 ticket, 3.. its players' open-ticket pointers
-- ARGV: 1 ticket id, 2 new state, 3 reason, 4 now ms, 5 retention ms,
--       6 expire only if expires_ms <= this ('' = unconditionally)
local st = redis.call('HMGET', KEYS[2], 'state', 'expires_ms')
if not st[1] then
  return {0, 'missing'}
end
if st[1] ~= 'searching' then
  return {0, st[1]}
end
if ARGV[6] ~= '' and tonumber(st[2]) > tonumber(ARGV[6]) then
  return {0, st[1]}
end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'reason', ARGV[3], 'closed_ms', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
  end
end
return {1, ARGV[2]}
