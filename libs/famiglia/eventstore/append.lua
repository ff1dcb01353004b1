-- famiglia event store: append one command's events to a match, atomically.
--
-- KEYS[1]  match stream        <prefix>:{pNN}:match:<match_id>
-- KEYS[2]  match version key   <prefix>:{pNN}:version:<match_id>
-- KEYS[3]  partition stream    <prefix>:{pNN}:partition
-- KEYS[4]  command record      <prefix>:{pNN}:cmd:<match_id>:<command_id>  (absent without a command id)
-- ARGV[1]  expected version
-- ARGV[2]  match id
-- ARGV[3]  command id ("" for none)
-- ARGV[4]  partition stream MAXLEN (~), "0" for unbounded
-- ARGV[5..] serialized EventEnvelope bytes, seq = expected + 1, + 2, ...
--
-- Returns {status, version, first_seq, last_seq}:
--   status 0 appended, 1 duplicate command (the first answer, nothing written),
--   status 2 conflict (version is the actual version, nothing written).
--
-- Every check happens before the first write: Redis does not roll back a
-- script that fails half-way, so nothing after the first XADD may fail.
-- Only Redis 6.2 commands are used (no functions, no script flags).

local expected = tonumber(ARGV[1])
local match_id = ARGV[2]
local command_id = ARGV[3]
local maxlen = tonumber(ARGV[4])
local count = #ARGV - 4

-- 1. A command id seen before gets its first answer, even if `expected` is stale now.
if KEYS[4] then
  local seen = redis.call('GET', KEYS[4])
  if seen then
    local first, last = string.match(seen, '^(%d+):(%d+)$')
    return {1, tonumber(last), tonumber(first), tonumber(last)}
  end
end

-- 2. The version: the kept version key (survives trimming), healed by the
--    stream's last id should the two ever disagree, so the explicit XADD ids
--    below can never be refused as "equal or smaller" mid-batch.
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if top[1] then
  local top_seq = tonumber(string.match(top[1][1], '^(%d+)-'))
  if top_seq > version then
    version = top_seq
  end
end
if version ~= expected then
  return {2, version, 0, 0}
end

-- 3. Write: the match stream (entry id = seq), the partition stream, then the records.
for i = 1, count do
  local seq = string.format('%d', expected + i)
  local envelope = ARGV[4 + i]
  if i == 1 and command_id ~= '' then
    -- `c` lets trim() find the command records to drop without a key scan.
    redis.call('XADD', KEYS[1], seq .. '-0', 'e', envelope, 'c', command_id)
  else
    redis.call('XADD', KEYS[1], seq .. '-0', 'e', envelope)
  end
  if maxlen > 0 then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', maxlen, '*', 'm', match_id, 's', seq, 'e', envelope)
  else
    redis.call('XADD', KEYS[3], '*', 'm', match_id, 's', seq, 'e', envelope)
  end
end

local first = expected + 1
local last = expected + count
redis.call('SET', KEYS[2], string.format('%d', last))
if KEYS[4] then
  redis.call('SET', KEYS[4], string.format('%d:%d', first, last))
end
return {0, last, first, last}
