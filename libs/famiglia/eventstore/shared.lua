-- famiglia event store: what the rare-path scripts (stage.lua, write_out.lua, trim.lua)
-- share. The store puts it in front of each of them when it loads them (redis_store._script):
-- a Redis script cannot load another. append.lua spells its own: it is timed (issue 10,
-- figure 2), and every function defined here is a closure each call would build.

-- The version key and, with a command id, the command's record, in one read.
local function read_version(version_key, record)
  if record then
    local got = redis.call('MGET', version_key, record)
    return got[1], got[2]
  end
  return redis.call('GET', version_key), nil
end

-- The version, or the stream's last seq should the version key be behind it (lost, or
-- restored from an older file): the stream is the truth.
local function healed(stream, version)
  local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  if top[1] then
    local top_seq = tonumber(string.match(top[1][1], '^(%d+)-'))
    if top_seq > version then
      return top_seq
    end
  end
  return version
end

-- (position, version) from the version key: "<position>:<version>" while events are
-- staged, else "<version>", healed, for both.
local function position_of(stored, stream)
  local position, version = string.match(stored or '', '^(%d+):(%d+)$')
  if position then
    return tonumber(position), tonumber(version)
  end
  version = healed(stream, tonumber(stored or '0') or 0)
  return version, version
end

-- One envelope to the partition stream, trimmed to about `maxlen` ("0": unbounded).
local function to_partition(partition, maxlen, envelope)
  if maxlen == '0' then
    redis.call('XADD', partition, '*', 'e', envelope)
  else
    redis.call('XADD', partition, 'MAXLEN', '~', maxlen, '*', 'e', envelope)
  end
end

