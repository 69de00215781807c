/**
 * One script per operation of a grant pool in Redis (redis-grant-pool.ts),
 * each the shared prelude (grant-lua.ts) and its own step, answering JSON.
 */
import { Script } from '../redis/script';
import { GRANT_LUA, POOL_ARGS, POOL_KEYS } from './grant-lua';

/**
 * ask / hold / release / look on one key, as the local pool does them; the
 * answer: {granted, entry, position, table, changed, mayAdmit}. A new entry
 * beyond MAX_ENTRIES is refused (granted false, no entry).
 */
export const GRANT_SYNC = new Script({
  name: 'grantSync',
  keys: POOL_KEYS,
  args: [...POOL_ARGS, 'key', 'op', 'priority', 'weight', 'waitMs', 'lapseMs', 'note', 'requeue', 'create', 'maxEntries'],
  clock: true,
  lua: `${GRANT_LUA}
local swept = sweep()
local key, op = A.key, A.op
local before = redis.call('HGET', K.entries, key)
local wasGranted = false
if before then wasGranted = cjson.decode(before).state == 'granted' end
local granted = false
local e = entry(key)
local function merge(note) for k, v in pairs(cjson.decode(note)) do e.note[k] = v end end
if op == 'ask' then
  if A.requeue == '1' and e and e.state == 'granted' then remove(key) e = nil end
  if not e then
    if redis.call('HLEN', K.entries) < tonumber(A.maxEntries) then
      e = { key = key, state = 'waiting', priority = tonumber(A.priority), weight = tonumber(A.weight), askedAt = now, since = now, renewedAt = now,
        waitMs = tonumber(A.waitMs), lapseMs = tonumber(A.lapseMs), note = cjson.decode(A.note) }
      redis.call('ZADD', K.queue, rankOf(e), key)
      put(e)
    end
  else
    merge(A.note)
    e.waitMs, e.lapseMs = tonumber(A.waitMs), tonumber(A.lapseMs)
    if e.state == 'waiting' then
      e.weight = tonumber(A.weight)
      if e.priority ~= tonumber(A.priority) then
        e.priority = tonumber(A.priority)
        redis.call('ZADD', K.queue, rankOf(e), key)
      end
    end
  end
  if e then
    renew(e)
    if e.state == 'granted' then granted = true
    elseif fits(e) then
      toHolder(e)
      count(e, 1)
      updateOver(false)
      granted = true
    end
    put(e)
  end
elseif op == 'hold' then
  if not e then
    if A.create ~= '' and redis.call('HLEN', K.entries) < tonumber(A.maxEntries) then
      e = { key = key, state = 'granted', priority = tonumber(A.priority), weight = 0, askedAt = now, since = now, renewedAt = now,
        waitMs = 0, lapseMs = tonumber(A.lapseMs), note = cjson.decode(A.create) }
      redis.call('ZADD', K.holders, now, key)
    end
  elseif e.state == 'waiting' then
    -- A session came while it waited (the driver at the station): it counts from now.
    toHolder(e)
    e.weight = 0
  end
  if e then
    renew(e)
    R.usedKW = R.usedKW + tonumber(A.weight) - e.weight
    e.weight, e.priority, e.lapseMs = tonumber(A.weight), tonumber(A.priority), tonumber(A.lapseMs)
    merge(A.note)
    put(e)
    updateOver(false)
  end
elseif op == 'release' then
  remove(key)
  e = nil
elseif e then
  renew(e)
  put(e)
end
saveRules()
local after = redis.call('HGET', K.entries, key)
local afterEntry = after and cjson.decode(after) or nil
local beforeEntry = before and cjson.decode(before) or nil
local mayAdmit = (beforeEntry ~= nil and afterEntry == nil) or (wasGranted and afterEntry ~= nil and afterEntry.weight < beforeEntry.weight - EPS) or swept
local function sig(x) if not x then return '' end return x.state .. '|' .. x.priority .. '|' .. x.weight end
-- A change any replica's table shows (renewals aside) moves the pool's version: the others notice it at their next cycle.
local changed = swept or sig(beforeEntry) ~= sig(afterEntry)
local version = changed and redis.call('HINCRBY', K.rules, 'version', 1) or tonumber(redis.call('HGET', K.rules, 'version') or '0')
local position = 0
if afterEntry and afterEntry.state == 'waiting' then position = redis.call('ZRANK', K.queue, key) + 1 end
return cjson.encode({ granted = granted and afterEntry ~= nil and afterEntry.state == 'granted', entry = view(afterEntry), position = position,
  table = tableOf(false), changed = changed, mayAdmit = mayAdmit, version = version, epoch = R.epoch })`,
});

/** At deploy: the configured rules; a limit set at run time is kept unless the configured one changed since. */
export const GRANT_CONFIGURE = new Script({
  name: 'grantConfigure',
  keys: POOL_KEYS,
  args: POOL_ARGS,
  clock: true,
  lua: `${GRANT_LUA}
local cl, cb = num(A.confLimit), num(A.confBudget)
if R.fresh or R.confLimit ~= cl or R.confBudget ~= cb then R.limit, R.budgetKW = cl, cb end
R.confLimit, R.confBudget = cl, cb
local aging = tonumber(A.agingMs)
if aging ~= R.agingMs then
  R.agingMs = aging
  local keys = redis.call('ZRANGE', K.queue, 0, -1)
  for _, k in ipairs(keys) do redis.call('ZADD', K.queue, rankOf(entry(k)), k) end
end
updateOver(false)
saveRules()
return cjson.encode({ epoch = R.epoch, version = redis.call('HINCRBY', K.rules, 'version', 1) })`,
});

/** The limit at run time, kept across restarts and for every replica. */
export const GRANT_SET_LIMIT = new Script({
  name: 'grantSetLimit',
  keys: POOL_KEYS,
  args: [...POOL_ARGS, 'limit', 'budgetKW'],
  clock: true,
  lua: `${GRANT_LUA}
R.limit, R.budgetKW = num(A.limit), num(A.budgetKW)
updateOver(false)
saveRules()
local version = redis.call('HINCRBY', K.rules, 'version', 1)
return cjson.encode({ table = tableOf(true), queue = entries(redis.call('ZRANGE', K.queue, 0, -1)), version = version, epoch = R.epoch })`,
});

/** Every entry: the holders, then the queue in order. */
export const GRANT_LIST = new Script({
  name: 'grantList',
  keys: POOL_KEYS,
  args: POOL_ARGS,
  clock: true,
  lua: `${GRANT_LUA}
if sweep() then redis.call('HINCRBY', K.rules, 'version', 1) end
saveRules()
return cjson.encode({ table = tableOf(true), queue = entries(redis.call('ZRANGE', K.queue, 0, -1)), epoch = R.epoch })`,
});
