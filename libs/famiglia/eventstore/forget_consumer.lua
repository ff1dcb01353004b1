-- Remove a consumer of a group that holds nothing and has been idle long enough
-- (PartitionConsumer.forget_idle_consumer): XGROUP DELCONSUMER drops the consumer's
-- pending entries with it, so the look (XINFO CONSUMERS) and the delete are one step. A
-- caller's own earlier look is no proof: a consumer restarted under that name may have read
-- since, and its entries would be pending under no one, never delivered again.
--
-- KEYS[1] a partition stream; ARGV[1] the group, ARGV[2] the consumer, ARGV[3] the least
-- idle time (ms). Returns 1 if it was removed, 0 if not (holding entries, active, or absent).
for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local fields = {}
  for j = 1, #info - 1, 2 do
    fields[info[j]] = info[j + 1]
  end
  if fields['name'] == ARGV[2] then
    if tonumber(fields['pending']) == 0 and tonumber(fields['idle']) >= tonumber(ARGV[3]) then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
      return 1
    end
    return 0
  end
end
return 0
