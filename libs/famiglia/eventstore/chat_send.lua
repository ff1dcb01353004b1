-- famiglia match chat: store one message of a seat, atomically with its idempotency record and
-- its seat's rate count. Not an event: the match stream, its version and the partition stream
-- are not touched (no engine, replay, export or projection sees chat).
--
-- KEYS[1]  chat stream         <prefix>:{pNN}:chat:<match_id>
-- KEYS[2]  message record      <prefix>:{pNN}:chatmsg:<match_id>:<seat>:<message_id>  (hash)
-- KEYS[3]  the seat's sends    <prefix>:{pNN}:chatrate:<match_id>:<seat>  (list of ms, newest first)
-- KEYS[4]  the match's stream  <prefix>:{pNN}:match:<match_id>  (read only)
-- KEYS[5]  its version key      <prefix>:{pNN}:version:<match_id>  (read only)
-- ARGV[1]  sender seat, in digits
-- ARGV[2]  recipients, comma-separated seats ("" = the table)
-- ARGV[3]  text
-- ARGV[4]  now, Unix milliseconds, or "" for Redis's own clock (the rate window's and the new
--          id's: one clock for every command replica, whatever theirs say)
-- ARGV[5]  most messages a seat sends in a window ("0": no limit)
-- ARGV[6]  the window, milliseconds
-- ARGV[7]  the stream's MAXLEN (~)
-- ARGV[8]  expiry of the stream, milliseconds, refreshed by each message
-- ARGV[9]  expiry of the message record (at most ARGV[8]): long enough for any retry; its copy
--          of the text leaves Redis with it, not with the match's chat
--
-- Returns {0, id} stored; {1, id, recipients, text} a message_id seen before (nothing written:
-- the first message, which the caller compares with this one); {2, wait_ms} too fast; {3} the
-- match is archived (its stream trimmed, its version key kept: trim.lua), nothing written: a
-- replica that still holds the match in memory would otherwise leave a chat nobody reads.

local record = redis.call('HMGET', KEYS[2], 'id', 'to', 't')
if record[1] then
  return {1, record[1], record[2], record[3]}
end

if redis.call('EXISTS', KEYS[4]) == 0 and redis.call('EXISTS', KEYS[5]) == 1 then
  return {3}
end

local limit = tonumber(ARGV[5])
local now = tonumber(ARGV[4])
if ARGV[4] == '' then
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
if limit > 0 then
  local sends = redis.call('LRANGE', KEYS[3], 0, limit - 1)
  if #sends >= limit then
    local wait = tonumber(sends[limit]) + tonumber(ARGV[6]) - now
    if wait > 0 then
      return {2, tostring(wait)}
    end
  end
end

-- Each message gets a millisecond of its own, `<ms>-0`: now, or the one after the newest id
-- when now is not past it (messages in one millisecond, a clock gone back). Redis's own id (`*`)
-- counted the messages of a millisecond in its second part, so a reader handed `<ms>-1` with no
-- `<ms>-0` learnt that a message it may not read (a whisper) was stored just before, and when;
-- a millisecond skipped says nothing, as quiet ones are skipped all the time. The newest entry
-- is the last id made (MAXLEN trims the oldest, and famiglia deletes none); when an operator's
-- XDEL took it, XADD refuses an id below the stream's last one, and the next id is made from that
-- (XINFO's last-generated-id). Any other refusal (Redis past maxmemory, a replica's READONLY,
-- MISCONF: nothing written) is answered as Redis gave it, for the caller to tell it is Redis
-- refusing for now; XINFO on a stream not made yet would raise "no such key" instead. Ids
-- stored the old way (`<ms>-<n>`) stay below every new one.
local ms = math.max(now, 1)
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if top then
  local last = tonumber(string.match(top[1], '^(%d+)-'))
  if last >= ms then
    ms = last + 1
  end
end
local function store(at)
  return redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[7], string.format('%d-0', at),
                     'f', ARGV[1], 'to', ARGV[2], 't', ARGV[3])
end
local id = store(ms)
if type(id) == 'table' and id.err then
  local made = nil
  if redis.call('EXISTS', KEYS[1]) == 1 then
    local info = redis.call('XINFO', 'STREAM', KEYS[1])
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then
        made = tonumber(string.match(info[i + 1], '^(%d+)-'))
      end
    end
  end
  if made == nil or made < ms then  -- not refused for its id
    return redis.error_reply(id.err)
  end
  id = store(made + 1)
  if type(id) == 'table' and id.err then
    return redis.error_reply(id.err)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('HSET', KEYS[2], 'id', id, 'to', ARGV[2], 't', ARGV[3])
redis.call('PEXPIRE', KEYS[2], math.min(tonumber(ARGV[8]), tonumber(ARGV[9])))
if limit > 0 then
  redis.call('LPUSH', KEYS[3], string.format('%d', now))
  redis.call('LTRIM', KEYS[3], 0, limit - 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return {0, id}
