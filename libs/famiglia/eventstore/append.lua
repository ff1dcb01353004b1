-- famiglia event store: append one command's events to a match, atomically.
--
-- KEYS[1]  match stream        <prefix>:{pNN}:match:<match_id>
-- KEYS[2]  match version key   <prefix>:{pNN}:version:<match_id>
-- KEYS[3]  partition stream    <prefix>:{pNN}:partition
-- KEYS[4]  command record      <prefix>:{pNN}:cmd:<match_id>:<command_id>  (absent without a command id)
-- ARGV[1]  expected version, in digits
-- ARGV[2]  expected version + 1 (the first event's seq), in digits
-- ARGV[3]  command id ("" for none)
-- ARGV[4]  partition stream MAXLEN (~), "0" for unbounded
-- ARGV[5..] serialized EventEnvelope bytes, seq = expected + 1, + 2, ...
--
-- Returns, by the reply's type (the cheapest replies to build and to parse):
--   integer      appended; it is the number of events (they got expected + 1 .. + n)
--   bulk string  duplicate command: its record "first:last", the first answer (nothing written)
--   array {v}    conflict: v is the actual version (nothing written)
--
-- Nothing may fail after the first write (Redis does not roll back a script that
-- fails half-way). Every call to Redis costs the script more than the command's
-- own work, so the common path makes four: MGET, XADD, XADD, MSET.
-- Only Redis 6.2 commands are used (no functions, no script flags).
--
-- Versions stay text on the common path: the stored version is compared with
-- ARGV[1] as text and the first seq comes spelled, because turning numbers into
-- text (sprintf) and back (strtod) was a visible part of the script's time. Only
-- a batch's later seqs and the rare paths do arithmetic.

local keys, argv = KEYS, ARGV
local expected, first, record = argv[1], argv[2], keys[4]

-- 1. The version key and the command record in one read. A command id seen before
--    gets its first answer, even if `expected` is stale now.
local stored
if record then
  local got = redis.call('MGET', keys[2], record)
  if got[2] then
    return got[2]
  end
  stored = got[1]
else
  stored = redis.call('GET', keys[2])
end

-- The actual version when the match is not at `expected` by the version key, or the
-- stream refused the first entry: the kept version key (it survives trimming), healed
-- by the stream's last id should the two ever disagree. Off the common path.
local function actual()
  local version = tonumber(string.match(stored or '0', '^(%d+)') or '0')
  local top = redis.call('XREVRANGE', keys[1], '+', '-', 'COUNT', 1)
  if top[1] then
    local top_seq = tonumber(string.match(top[1][1], '^(%d+)-'))
    if top_seq > version then
      version = top_seq
    end
  end
  return version
end

-- 2. The expected-version check. A key that differs from `expected` may be lost or
--    behind the stream (or spelled otherwise, "07"): ask the stream. A key that reads
--    "<position>:<version>" has staged events (stage.lua): `expected` is then checked
--    against the position, and the staged events go to the streams first.
local staged_after
if (stored or '0') ~= expected then
  local position, version = string.match(stored or '', '^(%d+):(%d+)$')
  if position then
    if tonumber(position) ~= tonumber(expected) then
      return {tonumber(position)}
    end
    staged_after = version
  else
    local version = actual()
    if version ~= tonumber(expected) then
      return {version}
    end
  end
end

-- 2b. Staged events (rare): written to both streams at seqs version + 1, ..., position, as
--     they were staged, their list dropped. Their key shares the match's hash tag.
if staged_after then
  local staged_key = string.gsub(keys[2], '(:{p%d+}:)version:', '%1staged:', 1)
  local staged = redis.call('LRANGE', staged_key, 0, -1)
  local seq = tonumber(staged_after)
  for i = 1, #staged, 2 do
    seq = seq + 1
    local entry
    if staged[i] ~= '' then
      entry = redis.pcall('XADD', keys[1], seq .. '-0', 'e', staged[i + 1], 'c', staged[i])
    else
      entry = redis.pcall('XADD', keys[1], seq .. '-0', 'e', staged[i + 1])
    end
    if i == 1 and entry ~= seq .. '-0' then
      return {actual()} -- the stream is past the version key: nothing was written
    end
    if argv[4] == '0' then
      redis.call('XADD', keys[3], '*', 'e', staged[i + 1])
    else
      redis.call('XADD', keys[3], 'MAXLEN', '~', argv[4], '*', 'e', staged[i + 1])
    end
  end
  redis.call('DEL', staged_key)
end

-- 3. Write: the match stream (entry id = seq), the partition stream, then the records.
--    The first XADD doubles as the last check: a version key behind the stream's top
--    makes it fail (ids must grow) before anything is written, and that is a conflict.
--    It answers with the id it was given when it writes, so one comparison tells.
--    A partition entry holds the envelope alone: it names its match and seq itself.
local id, added = first .. '-0', nil
if record then
  -- `c` lets trim() find the command records to drop without a key scan.
  added = redis.pcall('XADD', keys[1], id, 'e', argv[5], 'c', argv[3])
else
  added = redis.pcall('XADD', keys[1], id, 'e', argv[5])
end
if added ~= id then
  local version = actual()
  if version ~= tonumber(expected) then
    return {version}
  end
  return added -- any other refusal (OOM, wrong type): nothing was written
end
local maxlen, last = argv[4], first
for i = 5, #argv do
  if i > 5 then
    -- Seqs are whole numbers far below 10^14, so tostring spells them as plain digits.
    last = tostring(first + (i - 5))
    redis.call('XADD', keys[1], last .. '-0', 'e', argv[i])
  end
  if maxlen == '0' then
    redis.call('XADD', keys[3], '*', 'e', argv[i])
  else
    redis.call('XADD', keys[3], 'MAXLEN', '~', maxlen, '*', 'e', argv[i])
  end
end

if record then
  redis.call('MSET', keys[2], last, record, first .. ':' .. last)
else
  redis.call('SET', keys[2], last)
end
return #argv - 4
