-- The table will not be made: put the proposal's tickets back in the queue at their old
-- place (mode 'requeue': its holds were lost before CreateMatch was asked), or end them as
-- failed with a reason (mode 'failed': CreateMatch refused the table). A requeued ticket
-- gets back the key lifetime it had before the claim (lifetime left + retention), and its
-- players' open-ticket pointers theirs (lifetime left + margin: the claim kept them a day);
-- one its player cancelled while it was claimed (`cancel_reason`, close_ticket.lua) ends cancelled.
-- Only this claim is undone: a ticket (and the proposal) carrying another claim token is the
-- same table claimed again since (the same tickets make the same proposal id: a matcher stalled
-- past its holds, whose claim a retry gave up meanwhile), and is left alone; so is a pointer to
-- a ticket this call did not release (that ticket is another claim's, or over). A claim from
-- before the tokens carries none: the token '' matches it.
-- KEYS: 1 queue, 2 claims, 3 proposal, 3+1..3+n ticket hashes, then open pointers
-- ARGV: 1 proposal id, 2 mode, 3 reason, 4 now ms, 5 retention ms, 6 n, 7 pointer margin ms,
--       7+1..7+n ticket ids, then for each open pointer the ticket id it must hold to be touched,
--       then the claim token
local n = tonumber(ARGV[6])
local token = ARGV[#ARGV]
local released = 0
local ended = {}
local left_of = {}
local touched = {}
for i = 1, n do
  local key = KEYS[3 + i]
  local st = redis.call('HMGET', key, 'state', 'proposal', 'created_ms', 'expires_ms', 'cancel_reason', 'claim')
  if st[1] == 'claimed' and st[2] == ARGV[1] and (st[6] or '') == token then
    released = released + 1
    touched[ARGV[7 + i]] = true
    if ARGV[2] == 'requeue' and st[5] then
      redis.call('HSET', key, 'state', 'cancelled', 'reason', st[5], 'closed_ms', ARGV[4])
      redis.call('PEXPIRE', key, ARGV[5])
      ended[ARGV[7 + i]] = true
    elseif ARGV[2] == 'requeue' then
      redis.call('HSET', key, 'state', 'searching')
      redis.call('HDEL', key, 'proposal', 'claimed_ms', 'claim')
      redis.call('ZADD', KEYS[1], st[3], ARGV[7 + i])
      local left = math.max(0, (tonumber(st[4]) or 0) - tonumber(ARGV[4]))
      redis.call('PEXPIRE', key, left + tonumber(ARGV[5]))
      left_of[ARGV[7 + i]] = left
    else
      redis.call('HSET', key, 'state', 'failed', 'reason', ARGV[3], 'closed_ms', ARGV[4])
      redis.call('PEXPIRE', key, ARGV[5])
    end
  end
end
for j = 4 + n, #KEYS do
  local owner = ARGV[7 + n + (j - 3 - n)]
  if touched[owner] and redis.call('GET', KEYS[j]) == owner then
    if ARGV[2] ~= 'requeue' or ended[owner] then
      redis.call('DEL', KEYS[j])
    elseif left_of[owner] then
      redis.call('PEXPIRE', KEYS[j], left_of[owner] + tonumber(ARGV[7]))
    end
  end
end
-- The claim itself: only this one (a proposal gone already leaves a claims entry to drop).
local claimed = redis.call('HGET', KEYS[3], 'claim')
if redis.call('EXISTS', KEYS[3]) == 0 or (claimed or '') == token then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[3])
end
return released
