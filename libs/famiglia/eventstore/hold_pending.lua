-- Hold every entry pending under a consumer, unread (PartitionConsumer.hold_pending): a
-- consumer restarted under its name reads its pending entries back a batch at a time, and
-- those it has not read back yet may have sat unacked past the group's claim idle time
-- (the consumer was down) -- another replica's XAUTOCLAIM would take them in the meantime.
--
-- KEYS[1] a partition stream; ARGV[1] the group, ARGV[2] the consumer, ARGV[3] where to
-- start ('-', or '(' and the last id of the previous call), ARGV[4] at most how many.
-- The listing and the XCLAIM JUSTID (idle time back to 0, delivery count unchanged) are one
-- step: an entry another consumer claims is never taken back. Returns {how many were held,
-- the last id held}.
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local rows = redis.call('XPENDING', stream, group, ARGV[3], '+', tonumber(ARGV[4]), consumer)
for first = 1, #rows, 1000 do  -- unpack's stack has room for a few thousand values
  local args = {stream, group, consumer, 0}
  for i = first, math.min(first + 999, #rows) do
    args[#args + 1] = rows[i][1]
  end
  args[#args + 1] = 'JUSTID'
  redis.call('XCLAIM', unpack(args))
end
if #rows == 0 then
  return {0, ''}
end
return {#rows, rows[#rows][1]}
