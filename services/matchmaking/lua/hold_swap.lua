-- Compare-and-set one player's hold (the key is the player's own slot, mm:hold:{<player>}).
-- The hold changes only from a value the caller expects, so a matcher never frees or
-- overwrites a hold that meanwhile went to another table.
-- KEYS: 1 hold
-- ARGV: 1 new value ('' = delete), 2 ttl ms of the new value,
--       3.. accepted current values: '=<value>' exactly, '^<prefix>' any value starting so,
--           '-' no hold at all
local cur = redis.call('GET', KEYS[1])
local ok = false
for i = 3, #ARGV do
  local want = ARGV[i]
  local kind, rest = string.sub(want, 1, 1), string.sub(want, 2)
  if kind == '-' and not cur then
    ok = true
  elseif cur and kind == '=' and cur == rest then
    ok = true
  elseif cur and kind == '^' and string.sub(cur, 1, #rest) == rest then
    ok = true
  end
  if ok then break end
end
if not ok then
  return 0
end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
