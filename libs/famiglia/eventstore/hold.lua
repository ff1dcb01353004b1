-- Keep a live consumer's pending entries from looking idle to the rest of its group
-- (PartitionConsumer.hold): XAUTOCLAIM takes over what sat unacked for its idle time,
-- so entries a consumer keeps waiting in memory would otherwise pass to another
-- consumer, or back to itself, while it still works on them.
--
-- KEYS[1] a partition stream; ARGV[1] the group, ARGV[2] the consumer, ARGV[3..] entry ids.
-- Each id pending under the consumer is claimed by it again (XCLAIM JUSTID: its idle time
-- back to 0, its delivery count unchanged). Returns {taken, gone}: the ids another consumer
-- holds (left with it), and those pending under no one (acked since, or the group was
-- recreated and has not delivered them again): neither is the consumer's any more.
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local mine, taken, gone = {}, {}, {}
for i = 3, #ARGV do
  local row = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1)[1]
  if not row then
    gone[#gone + 1] = ARGV[i]
  elseif row[2] == consumer then
    mine[#mine + 1] = ARGV[i]
  else
    taken[#taken + 1] = ARGV[i]
  end
end
for first = 1, #mine, 1000 do  -- unpack's stack has room for a few thousand values
  local args = {stream, group, consumer, 0}
  for i = first, math.min(first + 999, #mine) do
    args[#args + 1] = mine[i]
  end
  args[#args + 1] = 'JUSTID'
  redis.call('XCLAIM', unpack(args))
end
return {taken, gone}
