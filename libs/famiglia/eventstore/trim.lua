-- famiglia event store: drop a finished match's stream and its command records, keep its
-- version key. Only if the match did not move since the caller read the command ids
-- (returns -1 then), so no record of a new command is lost.
--
-- KEYS[1]  match stream
-- KEYS[2]  match version key
-- KEYS[3..] the match's chat stream and command records
-- ARGV[1]  the version the caller read
--
-- Returns how many entries the stream held, or -1. Loaded behind shared.lua (healed).

local version = healed(KEYS[1], tonumber(string.match(redis.call('GET', KEYS[2]) or '0', '(%d+)$')))
if version ~= tonumber(ARGV[1]) then
  return -1
end
local dropped = redis.call('XLEN', KEYS[1])
if version > 0 then
  redis.call('SET', KEYS[2], string.format('%d', version))
end
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[1])
return dropped
