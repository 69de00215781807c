/**
 * The Lua scripts of the coordination (docs/fleet.md, "Scripts"). Each one is
 * atomic in Redis: nothing runs between its reads and its writes, which is
 * what makes a lease check-and-renew, a compare-and-set of a state or a take
 * from the shared budget safe with any number of replicas. Times that must
 * agree across machines come from Redis's own clock (TIME), never from a
 * replica's. Every script touches only keys passed in KEYS, all under one
 * fleet prefix (one cluster slot, see keys.ts).
 */
import { Script } from './connection';

/** Redis's clock, in the scripts: ms and µs since the epoch. */
const NOW = `
local t = redis.call('TIME')
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowMs = math.floor(nowUs / 1000)
`;

/**
 * A replica says it is alive and reads who else is.
 * KEYS: sorted set of members, hash of their info (the sorted set's name again
 * when there is none), and for a watch scope its list's version, its epoch,
 * its loss mark and its restores counter. ARGV: replica id, ttl ms, info JSON
 * ('' = none), leave ('1' = remove me), and for a scope the epoch this replica
 * last saw ('' = none yet), the loss mark's longest life in ms and the members
 * it last saw. Returns {version or false, epoch or false, ms the loss mark has
 * left (negative: none), restores or false, id1, info1, id2, info2, …} of the
 * live members, pruning the dead ones.
 *
 * The epoch is written once, when the scope's keys are empty: a replica that
 * finds another epoch than the one it saw knows Redis lost its data meanwhile
 * (restarted without persistence, or failed over to a replica that had not
 * caught up), however many others saw it first and wrote the list again. The
 * first one back that had seen the old epoch writes the loss mark: the
 * members it saw before the loss, each of which takes itself out once it has
 * put its states back (RESTORE_STATES), for at most ARGV[6] ms (data-loss.ts).
 */
export const HEARTBEAT = new Script(
  'heartbeat',
  `${NOW}
local me, ttl, info, leave = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local withInfo = KEYS[2] ~= KEYS[1]
if leave then
  redis.call('ZREM', KEYS[1], me)
  if withInfo then redis.call('HDEL', KEYS[2], me) end
else
  redis.call('ZADD', KEYS[1], nowMs + ttl, me)
  if withInfo and info ~= '' then redis.call('HSET', KEYS[2], me, info) end
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowMs)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
  if withInfo then redis.call('HDEL', KEYS[2], unpack(dead)) end
end
-- A fleet nobody runs any more leaves nothing behind.
redis.call('PEXPIRE', KEYS[1], ttl * 20)
if withInfo then redis.call('PEXPIRE', KEYS[2], ttl * 20) end
local out = { false, false, -2, false }
if #KEYS >= 6 then
  out[1] = redis.call('GET', KEYS[3])
  local epoch = redis.call('GET', KEYS[4])
  if not epoch then
    epoch = t[1] .. '.' .. t[2] .. ':' .. me
    redis.call('SET', KEYS[4], epoch)
    if ARGV[5] ~= '' then
      redis.call('SADD', KEYS[5], me, unpack(ARGV, 7))
      redis.call('PEXPIRE', KEYS[5], ARGV[6])
    end
  end
  out[2] = epoch
  out[3] = redis.call('PTTL', KEYS[5])
  out[4] = redis.call('GET', KEYS[6])
end
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
for i = 1, #live do
  out[#out + 1] = live[i]
  out[#out + 1] = withInfo and redis.call('HGET', KEYS[2], live[i]) or ''
end
return out`,
);

/**
 * A replica of the fleet says it is alive and what it is (its info JSON), and
 * reads who else is. KEYS: sorted set of members, hash of their info. ARGV:
 * replica id, ttl ms, info JSON (an object; '' = none), leave ('1' = remove
 * me). The info is kept with `at`, Redis's time of this heartbeat in ms, as
 * its first field: what a replica says of its last answer from the service
 * (service-reach.ts) is then placed on one clock for all. Returns {Redis's
 * time in ms, id1, info1, id2, info2, …} of the live members, pruning the dead.
 */
export const FLEET_HEARTBEAT = new Script(
  'fleetHeartbeat',
  `${NOW}
local me, ttl, info, leave = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
if leave then
  redis.call('ZREM', KEYS[1], me)
  redis.call('HDEL', KEYS[2], me)
else
  redis.call('ZADD', KEYS[1], nowMs + ttl, me)
  if string.sub(info, 1, 1) == '{' and string.len(info) > 2 then
    redis.call('HSET', KEYS[2], me, '{"at":' .. string.format('%.0f', nowMs) .. ',' .. string.sub(info, 2))
  end
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowMs)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
  redis.call('HDEL', KEYS[2], unpack(dead))
end
-- A fleet nobody runs any more leaves nothing behind.
redis.call('PEXPIRE', KEYS[1], ttl * 20)
redis.call('PEXPIRE', KEYS[2], ttl * 20)
local out = { nowMs }
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
for i = 1, #live do
  out[#out + 1] = live[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or ''
end
return out`,
);

/**
 * Takes, renews and gives back leases in one call. KEYS: the lease keys, the
 * first ARGV[3] of them wanted, the rest to be released. ARGV: replica id,
 * lease ms, how many are wanted. For each wanted key: 2 = acquired now, 1 =
 * renewed (already ours), 0 = held by another replica. Released keys are
 * deleted only when they are ours (a lease that lapsed and was taken by
 * another replica is left alone).
 */
export const LEASES = new Script(
  'leases',
  `local me, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if i <= n then
    if holder == me then redis.call('PEXPIRE', KEYS[i], ttl); out[i] = 1
    elseif not holder then redis.call('SET', KEYS[i], me, 'PX', ttl); out[i] = 2
    else out[i] = 0 end
  else
    if holder == me then redis.call('DEL', KEYS[i]) end
    out[i] = 0
  end
end
return out`,
);

/**
 * Compare-and-set of one token's reported state, only by its lease holder,
 * exactly once. KEYS: lease key, state hash. ARGV: replica id, token,
 * expected revision, the new state's JSON ('' = no session: a tombstone that
 * keeps the revision), commit id (16 hex digits, one per commit, the same on
 * its retries), '1' when the replica still holds the token by its own clock.
 * Kept as "<rev>:<ids>:<JSON>", ids being the last 8 commit ids applied,
 * newest first. A retry whose first try was applied (its answer
 * lost) finds its id there and succeeds, even when later commits followed;
 * while its try is still the newest and the lease ours, the state is
 * refreshed with the retry's. Returns the revision, -1 when the lease is not
 * ours, or {-2, current revision} when the state moved on without us.
 *
 * A lease nobody holds (it went with Redis's data) does not refuse a commit
 * whose expected revision is the one there, from a replica that still holds
 * the token by its own clock: its lease cannot have lapsed in Redis, so no
 * other replica can have held the token and committed meanwhile (a restore
 * can bring an old revision back after a loss), and the compare-and-set
 * keeps it exactly once. Refused, the poll's answer would be lost (a session
 * seen and never reported when its holder dies before the next poll). With no state there and another
 * revision expected, only the holder may write from nothing (ownership.ts).
 *
 * A state written from nothing starts at Redis's clock in ms, not at 1: after
 * Redis lost its data the revisions would otherwise start over, and a commit
 * still on its way from before the loss (retried under its id) would find the
 * revision it expects and be applied on top of the new holder's: the same
 * change committed, and emitted, twice.
 */
export const COMMIT_STATE = new Script(
  'commitState',
  `local cur = redis.call('HGET', KEYS[2], ARGV[2])
local rev, ids = 0, ''
if cur then
  rev = tonumber(string.match(cur, '^(%d+):') or '0')
  ids = string.match(cur, '^%d+:([%x,]+):') or ''
end
local holder = redis.call('GET', KEYS[1])
local mine = holder == ARGV[1]
local id = ARGV[5]
local at = string.find(ids, id, 1, true)
if at then
  if at == 1 and mine then redis.call('HSET', KEYS[2], ARGV[2], rev .. ':' .. ids .. ':' .. ARGV[4]) end
  return rev
end
if not mine and (holder or ARGV[6] ~= '1') then return -1 end
if rev ~= tonumber(ARGV[3]) then
  if not mine then return -1 end
  return { -2, rev }
end
if cur then rev = rev + 1 else
  local t = redis.call('TIME')
  rev = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
ids = string.sub(id .. ',' .. ids, 1, 8 * 17 - 1)
ids = string.gsub(ids, ',$', '')
redis.call('HSET', KEYS[2], ARGV[2], rev .. ':' .. ids .. ':' .. ARGV[4])
return rev`,
);

/**
 * Redis lost its data: a replica puts back the states it knows, each at its
 * own revision and only over an older one (or none): the newest known
 * anywhere wins, and a state committed since the loss (its revision from
 * Redis's clock, above any older one) is never overwritten. Then it takes
 * itself out of the loss mark, and counts a restore that wrote anything: a
 * replica that took a token from nothing before it (no mark held the token
 * back) learns so at its next heartbeat. KEYS: state hash, loss mark,
 * restores counter. ARGV: replica id, then token, revision, state JSON ('' =
 * no session) triples. Returns per token the revision there afterwards.
 */
export const RESTORE_STATES = new Script(
  'restoreStates',
  `local out, wrote = {}, false
for i = 2, #ARGV, 3 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  local had = cur and tonumber(string.match(cur, '^(%d+):') or '0') or -1
  local rev = tonumber(ARGV[i + 1])
  if had < rev then
    redis.call('HSET', KEYS[1], ARGV[i], rev .. ':' .. ARGV[i + 2])
    had = rev
    wrote = true
  end
  out[#out + 1] = had
end
redis.call('SREM', KEYS[2], ARGV[1])
if wrote then redis.call('INCR', KEYS[3]) end
return out`,
);

/**
 * Adds or removes watched tokens and bumps the list's version when anything
 * changed. KEYS: list, version, state hash. ARGV: '+' or '-', then tokens.
 * Removing a token forgets its state too. Returns the version.
 */
export const WATCH_LIST = new Script(
  'watchList',
  `local add = ARGV[1] == '+'
local changed = 0
for i = 2, #ARGV do
  if add then changed = changed + redis.call('SADD', KEYS[1], ARGV[i])
  else
    changed = changed + redis.call('SREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
if changed > 0 or redis.call('EXISTS', KEYS[2]) == 0 then return redis.call('INCR', KEYS[2]) end
return tonumber(redis.call('GET', KEYS[2]))`,
);

/** The shared token and how long Redis keeps it: {value, lifetime ms, ms left} or {} when none. KEYS: token. */
export const TOKEN_READ = new Script(
  'tokenRead',
  `local v = redis.call('HMGET', KEYS[1], 'v', 'l')
if not v[1] then return {} end
return { v[1], v[2], redis.call('PTTL', KEYS[1]) }`,
);

/**
 * Stores a token fetched by this replica and frees the fetch lock if still
 * ours. KEYS: token, lock. ARGV: value, lifetime ms, ms to keep, replica id.
 */
export const TOKEN_STORE = new Script(
  'tokenStore',
  `redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'l', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[4] then redis.call('DEL', KEYS[2]) end
return 1`,
);

/** Forgets the shared token, only if it is the given one (a newer token stays). KEYS: token. ARGV: value. */
export const TOKEN_DROP = new Script(
  'tokenDrop',
  `if redis.call('HGET', KEYS[1], 'v') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
);

/** Deletes a key only while it holds the given value (a lock, a claim). KEYS: key. ARGV: value. */
export const RELEASE = new Script(
  'release',
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
);

/**
 * One start from the fleet's request budget: starts are spaced at least
 * ARGV[1] µs apart on Redis's clock, so any 1 s window holds at most
 * rate + 1 of them, whatever the number of replicas. The next free start is
 * reserved for the caller if it is at most ARGV[3] µs away (first come, first
 * served across replicas: none of them starves). KEYS: budget. ARGV: spacing
 * µs, key TTL ms, longest wait µs. Returns {1, start µs, µs until it} (reserved)
 * or {0, µs until the next free start} (nothing reserved).
 */
export const BUDGET_TAKE = new Script(
  'budgetTake',
  `${NOW}
local at = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), nowUs)
if at - nowUs > tonumber(ARGV[3]) then return { 0, at - nowUs } end
redis.call('SET', KEYS[1], string.format('%.0f', at + tonumber(ARGV[1])), 'PX', ARGV[2])
return { 1, at, at - nowUs }`,
);

/**
 * Claims a command (dedup.ts) or reads back a claim whose answer was lost:
 * one call does both, so a retry is the same call. KEYS: claim, the fleet's
 * replicas (sorted set: id -> when its heartbeat lapses). ARGV: claimant
 * ("<attempt>:<replica id>"), claim ms, ms since the claimer's first try,
 * duplicate window ms, '1' when a claim still being sent may be taken over
 * from a replica that has left the fleet (a STOP: twice is harmless, never
 * is not), how old (ms, from its time to live) such a claim must be (a
 * lease, and a reconnection plus two cycles: a young claim's replica may not
 * have renewed its membership yet, as after Redis lost its data). Returns
 * 'OK' when the claim is now the caller's, else {the value held (the
 * caller's own claimant in it: its earlier try landed), 1 when its claimer
 * is among the live replicas (or it holds an outcome), else 0}: the caller
 * asks to take a claim over only once it has seen its claimer missing for
 * long enough (a write pause makes every membership look lapsed for a
 * moment). An outcome
 * published more than the window before the caller's first try (a duration,
 * on Redis's clock: no skew) is a finished command: claimed anew. A claimer
 * held up by a fault still sees the outcome of the send it raced with.
 */
export const COMMAND_CLAIM = new Script(
  'commandClaim',
  `${NOW}
local v = redis.call('GET', KEYS[1])
if v then
  local at = tonumber(string.match(v, '\\n(%d+) '))
  if at then
    if at + tonumber(ARGV[4]) > nowMs - tonumber(ARGV[3]) then return { v, 1 } end
  else
    local holder = string.match(v, '^[^:\\n]*:([^\\n]*)')
    local lapses = holder and redis.call('ZSCORE', KEYS[2], holder)
    local alive = lapses and tonumber(lapses) > nowMs
    if alive then return { v, 1 } end
    if ARGV[5] ~= '1' then return { v, 0 } end
    if tonumber(ARGV[2]) - redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then return { v, 0 } end
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. '\\n', 'PX', ARGV[2])
return 'OK'`,
);

/**
 * The sender of a command publishes its outcome under its claim, if the claim
 * is still its own. The claim's value is "<claimant>\n" while sending and
 * "<claimant>\n<ms on Redis's clock> <outcome JSON>" after. KEYS: claim.
 * ARGV: claimant, outcome JSON, ms to keep it. Returns 1, or 0 when the claim
 * was lost.
 */
export const COMMAND_PUBLISH = new Script(
  'commandPublish',
  `${NOW}
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '\\n' then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '\\n' .. nowMs .. ' ' .. ARGV[2], 'PX', ARGV[3])
return 1`,
);

/** charging-control: a wish under the next sequence number of the node's wishes (control-share.ts). */
export const POST_WISH = new Script(
  'postWish',
  `local seq = redis.call('HINCRBY', KEYS[1], '#seq', 1)
redis.call('HSET', KEYS[1], ARGV[1], seq .. ':' .. ARGV[2])
return seq`,
);
