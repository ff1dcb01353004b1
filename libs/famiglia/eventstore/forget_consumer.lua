-- Remove the consumers of a group that hold nothing and have been idle long enough
-- (PartitionConsumer.forget_idle_consumers): XGROUP DELCONSUMER drops a consumer's pending
-- entries with it, so the look (XINFO CONSUMERS) and the deletes are one step. A caller's own
-- earlier look is no proof: a consumer restarted under that name may have read since, and its
-- entries would be pending under no one, never delivered again. One listing for all the names
-- (a crash loop leaves thousands of dead consumers: one listing each was quadratic).
--
-- KEYS[1] a partition stream; ARGV[1] the group, ARGV[2] the least idle time (ms), ARGV[3..]
-- the consumers to look at. Returns the names removed (the others hold entries, are active,
-- or are absent).
local stream, group, least = KEYS[1], ARGV[1], tonumber(ARGV[2])
local wanted, removed = {}, {}
for i = 3, #ARGV do
  wanted[ARGV[i]] = true
end
for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
  local fields = {}
  for j = 1, #info - 1, 2 do
    fields[info[j]] = info[j + 1]
  end
  local name = fields['name']
  if wanted[name] and tonumber(fields['pending']) == 0 and tonumber(fields['idle']) >= least then
    redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
    removed[#removed + 1] = name
  end
end
return removed
