-- famiglia event store: write the staged events out in a block of the writer's making, then
-- one command's events, atomically (NP-H9).
--
-- The writer renumbers the staged events into the block (a slot per seat: where an answer
-- lands then tells nothing of when it came in); only their seq changed. Their command
-- records move with them, so a duplicate of a staged command answers with its own events.
-- append.lua's common path knows nothing of this: a rare path, a script of its own.
--
-- KEYS[1]  match stream        <prefix>:{pNN}:match:<match_id>
-- KEYS[2]  match version key   <prefix>:{pNN}:version:<match_id>
-- KEYS[3]  partition stream    <prefix>:{pNN}:partition
-- KEYS[4]  staged list         <prefix>:{pNN}:staged:<match_id>  (command id, envelope) pairs
-- KEYS[5]  command record      <prefix>:{pNN}:cmd:<match_id>:<command_id>  (absent without a command id)
-- ARGV[1]  expected position (version + staged events), in digits
-- ARGV[2]  command id ("" for none)
-- ARGV[3]  partition stream MAXLEN (~), "0" for unbounded
-- ARGV[4]  n: how many staged events the block places
-- ARGV[5 .. 4+n]  the seq each staged event takes in the block, in the order staged
-- ARGV[5+n]  the block's length
-- ARGV[6+n ..]  serialized EventEnvelope bytes: the block, then the command's events,
--               seq = version + 1, + 2, ...
--
-- Returns as append.lua: an integer (written; the number of the command's events), a bulk
-- string (a duplicate command's record "first:last", nothing written), an array {p}
-- (conflict: p is the actual position, nothing written), or an error reply (the block does
-- not place what is staged, nothing written). Nothing fails after the first write.

-- The store loads it behind shared.lua (read_version, position_of, healed, to_partition).

local keys, argv = KEYS, ARGV
local record = keys[5]

-- 1. A command id seen before gets its first answer.
local stored, known = read_version(keys[2], record)
if known then
  return known
end

-- 2. The position: "<position>:<version>" while events are staged, else the version,
--    healed by the stream's last id (as append.lua).
local position, version = position_of(stored, keys[1])
if position ~= tonumber(argv[1]) then
  return {position}
end
local n = tonumber(argv[4])
if position - version ~= n then
  return redis.error_reply(string.format('ERR %d events staged, the block places %d', position - version, n))
end

-- 3. Where each staged command goes: its record says how many events it has (from its first,
--    which carries its id); they must stay one after another.
local cmd_prefix = string.gsub(keys[2], '(:{p%d+}:)version:', '%1cmd:', 1) .. ':'
local staged = n > 0 and redis.call('LRANGE', keys[4], 0, -1) or {}
local named, moved = {}, {}
for k = 1, n do
  local command_id = staged[2 * k - 1]
  if command_id and command_id ~= '' then
    local first, last = string.match(redis.call('GET', cmd_prefix .. command_id) or '', '^(%d+):(%d+)$')
    if first and tonumber(first) == version + k then
      local new_first = tonumber(argv[4 + k])
      local count = tonumber(last) - tonumber(first) + 1
      for j = 1, count - 1 do
        if tonumber(argv[4 + k + j]) ~= new_first + j then
          return redis.error_reply('ERR staged command ' .. command_id .. ' placed apart')
        end
      end
      named[new_first] = command_id
      moved[#moved + 1] = {cmd_prefix .. command_id, new_first .. ':' .. (new_first + count - 1)}
    end
  end
end

-- 4. Write: every envelope to the match stream (entry id = seq; `c` names a command on its
--    first event, for trim) and the partition stream. The first XADD doubles as the last
--    check: a version key behind the stream's top makes it fail before anything is written.
local block_length = tonumber(argv[5 + n])
local first_arg = 6 + n
local command_first = version + block_length + 1
if argv[2] ~= '' then
  named[command_first] = argv[2]
end
local maxlen = argv[3]
for i = first_arg, #argv do
  local seq = version + (i - first_arg) + 1
  local id, entry = seq .. '-0', {'XADD', keys[1], seq .. '-0', 'e', argv[i]}
  if named[seq] then
    entry[6], entry[7] = 'c', named[seq]
  end
  if i == first_arg then
    local added = redis.pcall(unpack(entry))
    if added ~= id then
      local top = healed(keys[1], version)
      if top ~= version then
        return {top}
      end
      return added -- any other refusal (OOM, wrong type): nothing was written
    end
  else
    redis.call(unpack(entry))
  end
  to_partition(keys[3], maxlen, argv[i])
end

-- 5. The records: the version, the staged commands' at their new seqs, the command's own.
local last = version + (#argv - first_arg) + 1
redis.call('DEL', keys[4])
redis.call('SET', keys[2], string.format('%d', last))
for _, pair in ipairs(moved) do
  redis.call('SET', pair[1], pair[2])
end
if record then
  redis.call('SET', record, string.format('%d:%d', command_first, last))
end
return last - command_first + 1
