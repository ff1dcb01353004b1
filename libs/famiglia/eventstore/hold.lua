-- Keep a live consumer's pending entries from looking idle to the rest of its group
-- (PartitionConsumer.hold): XAUTOCLAIM takes over what sat unacked for its idle time,
-- so entries a consumer keeps waiting in memory would otherwise pass to another
-- consumer, or back to itself, while it still works on them.
--
-- KEYS[1] a partition stream; ARGV[1] the group, ARGV[2] the consumer, ARGV[3..] entry ids.
-- Each id pending under the consumer is claimed by it again (XCLAIM JUSTID: its idle time
-- back to 0, its delivery count unchanged). Returns {taken, gone}: the ids another consumer
-- holds (left with it), and those pending under no one past the group's last delivered id
-- (the group was recreated and has not delivered them again: it will, to whichever consumer
-- reads): neither is the consumer's any more. An id pending under no one that the group has
-- delivered (acked since; or its record dropped, XGROUP DELCONSUMER, the entry trimmed) is
-- neither: the group gives it to no one again, so the consumer keeping it is the one to finish.
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local mine, taken, gone = {}, {}, {}
local last  -- the group's last delivered id, {ms, seq}, looked up at the first id pending under no one

local function parsed(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end

local function delivered(id)
  if not last then
    last = {0, 0}
    for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
      local fields = {}
      for j = 1, #info - 1, 2 do
        fields[info[j]] = info[j + 1]
      end
      if fields['name'] == group then
        last = parsed(fields['last-delivered-id'])
      end
    end
  end
  local at = parsed(id)
  return at[1] < last[1] or (at[1] == last[1] and at[2] <= last[2])
end

for i = 3, #ARGV do
  local row = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1)[1]
  if not row then
    if not delivered(ARGV[i]) then
      gone[#gone + 1] = ARGV[i]
    end
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
