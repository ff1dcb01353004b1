-- End an open ticket (cancelled by a player, expired, or failed by a declined invite),
-- only from the states the caller allows. A claimed ticket is already on its way to a
-- table and is never ended here: that is what makes a cancellation racing the matcher
-- safe (one of the two wins, atomically). A cancel of one is written down (`cancel_reason`)
-- instead: should that table not be made after all and its tickets go back to the queue
-- (release.lua, a hold lost), this one ends cancelled there, as its player asked.
-- KEYS: 1 queue, 2 pending, 3 ticket, 4.. its players' open-ticket pointers
-- ARGV: 1 ticket id, 2 new state, 3 reason, 4 now ms, 5 retention ms,
--       6 end only if expires_ms <= this ('' = unconditionally), 7 states it may end from (comma list)
local st = redis.call('HMGET', KEYS[3], 'state', 'expires_ms')
if not st[1] then
  return {0, 'missing'}
end
if not string.find(',' .. ARGV[7] .. ',', ',' .. st[1] .. ',', 1, true) then
  if st[1] == 'claimed' and ARGV[2] == 'cancelled' then
    redis.call('HSET', KEYS[3], 'cancel_reason', ARGV[3])
  end
  return {0, st[1]}
end
if ARGV[6] ~= '' and tonumber(st[2]) > tonumber(ARGV[6]) then
  return {0, st[1]}
end
redis.call('HSET', KEYS[3], 'state', ARGV[2], 'reason', ARGV[3], 'closed_ms', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 4, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
  end
end
return {1, ARGV[2]}
