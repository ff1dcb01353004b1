-- famiglia event store: stage one command's events (NP-H9), atomically.
--
-- Staged events take their seqs but wait outside the match stream, in a list, until the
-- match's next append writes them to the streams ahead of its own events (append.lua).
-- While events are staged the version key reads "<position>:<version>" instead of
-- "<version>", so no append that does not know of them can pass its version check.
--
-- KEYS[1]  match stream        <prefix>:{pNN}:match:<match_id>
-- KEYS[2]  match version key   <prefix>:{pNN}:version:<match_id>
-- KEYS[3]  staged list         <prefix>:{pNN}:staged:<match_id>  (command id, envelope) pairs
-- KEYS[4]  command record      <prefix>:{pNN}:cmd:<match_id>:<command_id>  (absent without a command id)
-- ARGV[1]  expected position (version + staged events), in digits
-- ARGV[2]  command id ("" for none)
-- ARGV[3..] serialized EventEnvelope bytes, seq = expected + 1, + 2, ...
--
-- Returns as append.lua: an integer (staged, the number of events), a bulk string (a
-- duplicate command's record "first:last", nothing written) or an array {p} (conflict: p
-- is the actual position, nothing written).

-- The store loads it behind shared.lua (read_version, position_of, healed, to_partition).

local keys, argv = KEYS, ARGV
local record = keys[4]

local stored, known = read_version(keys[2], record)
if known then
  return known
end

-- The position: "<position>:<version>" while events are staged, else the version.
local position, version = position_of(stored, keys[1])
if position ~= tonumber(argv[1]) or position == 0 then
  return {position}
end

local pairs_ = {}
for i = 3, #argv do
  pairs_[#pairs_ + 1] = (i == 3) and argv[2] or ''
  pairs_[#pairs_ + 1] = argv[i]
end
redis.call('RPUSH', keys[3], unpack(pairs_))
local last = position + #argv - 2
redis.call('SET', keys[2], string.format('%d:%d', last, version))
if record then
  redis.call('SET', record, string.format('%d:%d', position + 1, last))
end
return #argv - 2
