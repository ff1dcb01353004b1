-- famiglia event store: drop a finished match's stream and its command records, keep its
-- version key. Only if the match did not move since the caller read the command ids
-- (returns -1 then), so no record of a new command is lost; and not while its rematch's
-- creation is pending (returns -2), since the rematch is made from it: looked at here, in the
-- write that drops it, so a table completing after the caller looked keeps it all the same.
--
-- KEYS[1]  match stream
-- KEYS[2]  match version key
-- KEYS[3]  the partition's pending rematch creations (zset: match id -> ms)
-- KEYS[4]  the match's rematch asks (pending only while they last: expired, nothing makes it)
-- KEYS[5..] the match's chat stream and command records
-- ARGV[1]  the version the caller read
-- ARGV[2]  the match id (its member in KEYS[3])
--
-- Every key carries the match's partition tag: one slot. Returns how many entries the stream
-- held, -1 or -2. Loaded behind shared.lua (healed).

if redis.call('ZSCORE', KEYS[3], ARGV[2]) and redis.call('EXISTS', KEYS[4]) == 1 then
  return -2
end
local version = healed(KEYS[1], tonumber(string.match(redis.call('GET', KEYS[2]) or '0', '(%d+)$')))
if version ~= tonumber(ARGV[1]) then
  return -1
end
local dropped = redis.call('XLEN', KEYS[1])
if version > 0 then
  redis.call('SET', KEYS[2], string.format('%d', version))
end
for i = 5, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[1])
return dropped
