/**
 * The Lua of a grant pool in Redis (redis-grant-pool.ts): the same rules as
 * the local pool (nodes/lib/coordination/grant-pool.ts), on Redis's clock,
 * applied atomically by one script per operation. A pool's keys:
 *
 *   e   hash key -> entry JSON {key, state, priority, weight, askedAt, since, renewedAt, renewedBusy, waitMs, lapseMs, note}
 *   q   sorted set of the waiters by rank (askedAt less what the priority is worth), ties by key
 *   h   sorted set of the holders by since, ties by key
 *   wx  sorted set of the waiters by when they expire (renewedAt + waitMs)
 *   lx  sorted set of the holders by when they lapse on the busy clock (renewedBusy + lapseMs)
 *   r   hash: limit, budgetKW, agingMs, confLimit, confBudget (the configuration's), usedKW,
 *       overSince, newest (the latest renewal of any entry), busy (the busy clock: the time with
 *       renewals, a silence of the whole pool counted at most a twentieth of the renewer's lapseMs),
 *       lastSweep, epoch, recountUntil
 *
 * Every script is called with the pool's configured rules (so a pool whose
 * keys Redis lost is put back at once), the epoch this replica saw, the
 * re-count time, and a clock offset (0 but in tests).
 */

/** Keys and arguments every grant script has first, in this order. */
export const POOL_KEYS = ['entries', 'queue', 'holders', 'waitExpiry', 'lapses', 'rules'] as const;
export const POOL_ARGS = ['confLimit', 'confBudget', 'agingMs', 'epochSeen', 'recountMs', 'offsetMs'] as const;

export const GRANT_LUA = `
local EPS = 1e-9
local STRICT = 4398046511104
local HEAD = 16
local now = select(2, redisTime()) + tonumber(A.offsetMs)
local function num(v) if v == nil or v == false or v == '' then return nil end return tonumber(v) end
local function str(n) if n == nil then return '' end return string.format('%.17g', n) end

-- The rules, put back from the configuration when Redis lost the pool (a new epoch: a re-count first).
local R = {}
do
  local raw = redis.call('HMGET', K.rules, 'limit', 'budgetKW', 'agingMs', 'usedKW', 'overSince', 'newest', 'lastSweep', 'epoch', 'recountUntil', 'confLimit', 'confBudget', 'busy')
  if not raw[8] then
    R.epoch = str(redisTime())
    R.limit, R.budgetKW, R.agingMs = num(A.confLimit), num(A.confBudget), tonumber(A.agingMs)
    R.confLimit, R.confBudget = R.limit, R.budgetKW
    R.usedKW, R.newest, R.lastSweep, R.busy = 0, now, now, now
    R.recountUntil = (A.epochSeen ~= '') and (now + tonumber(A.recountMs)) or -1
    R.fresh = true
  else
    R.limit, R.budgetKW, R.agingMs = num(raw[1]), num(raw[2]), tonumber(raw[3]) or 0
    R.usedKW, R.overSince, R.newest, R.lastSweep = tonumber(raw[4]) or 0, num(raw[5]), tonumber(raw[6]) or now, tonumber(raw[7]) or 0
    R.epoch, R.recountUntil, R.confLimit, R.confBudget = raw[8], tonumber(raw[9]) or -1, num(raw[10]), num(raw[11])
    R.busy = tonumber(raw[12]) or R.newest
  end
end
local function saveRules()
  redis.call('HSET', K.rules, 'limit', str(R.limit), 'budgetKW', str(R.budgetKW), 'agingMs', str(R.agingMs), 'usedKW', str(R.usedKW),
    'overSince', str(R.overSince), 'newest', str(R.newest), 'lastSweep', str(R.lastSweep), 'epoch', R.epoch, 'recountUntil', str(R.recountUntil),
    'confLimit', str(R.confLimit), 'confBudget', str(R.confBudget), 'busy', str(R.busy))
end

local function entry(key) local raw = redis.call('HGET', K.entries, key) if raw then return cjson.decode(raw) end return nil end
local function rankOf(e) return e.askedAt - e.priority * ((R.agingMs > 0) and R.agingMs or STRICT) end
local function inUse() return redis.call('ZCARD', K.holders) end
local function put(e)
  redis.call('HSET', K.entries, e.key, cjson.encode(e))
  if e.state == 'waiting' then redis.call('ZADD', K.waitExpiry, e.renewedAt + e.waitMs, e.key)
  else redis.call('ZADD', K.lapses, (e.renewedBusy or R.busy) + e.lapseMs, e.key) end
end
-- A silence of the whole pool (Redis away, every replica down) moves the busy clock a little only: no grant lapses for it.
local function renew(e)
  if now > R.newest then
    R.busy = R.busy + math.min(now - R.newest, e.lapseMs / 20)
    R.newest = now
  end
  e.renewedAt = now
  e.renewedBusy = R.busy
end
local function updateOver(freed)
  local over = (R.limit and inUse() > R.limit) or (R.budgetKW and R.usedKW > R.budgetKW + EPS)
  if not over then R.overSince = nil elseif R.overSince == nil or freed then R.overSince = now end
end
local function count(e, sign)
  R.usedKW = R.usedKW + sign * e.weight
  if inUse() == 0 then R.usedKW = 0 end
end
local function toHolder(e)
  redis.call('ZREM', K.queue, e.key)
  redis.call('ZREM', K.waitExpiry, e.key)
  e.state = 'granted'
  e.since = now
  redis.call('ZADD', K.holders, e.since, e.key)
end
local function remove(key)
  local e = entry(key)
  if not e then return nil end
  redis.call('HDEL', K.entries, key)
  if e.state == 'waiting' then
    redis.call('ZREM', K.queue, key)
    redis.call('ZREM', K.waitExpiry, key)
  else
    redis.call('ZREM', K.holders, key)
    redis.call('ZREM', K.lapses, key)
    count(e, -1)
    updateOver(true)
  end
  return e
end

-- Waiters not asked again within their waitMs go; a grant lapses when unrenewed for its lapseMs while others were renewed.
local function sweep()
  if now - R.lastSweep < 1000 then return false end
  R.lastSweep = now
  local dropped = false
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', K.waitExpiry, '-inf', '(' .. str(now))) do remove(k) dropped = true end
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', K.lapses, '-inf', '(' .. str(R.busy))) do remove(k) dropped = true end
  return dropped
end

-- In order, and every waiter ahead of it fits too: no overtaking a head that does not fit.
local function fits(e)
  if now < R.recountUntil then return false end
  if R.limit == nil and R.budgetKW == nil then return false end
  local pos = redis.call('ZRANK', K.queue, e.key)
  if not pos then return false end
  local n, kw = inUse(), R.usedKW
  for from = 0, pos, 500 do
    local ahead = redis.call('ZRANGE', K.queue, from, math.min(pos, from + 499))
    local raws = redis.call('HMGET', K.entries, unpack(ahead))
    for i = 1, #ahead do
      n = n + 1
      kw = kw + cjson.decode(raws[i]).weight
      if (R.limit and n > R.limit) or (R.budgetKW and kw > R.budgetKW + EPS) then return false end
    end
  end
  return true
end

local function view(e)
  if not e then return cjson.null end
  return { key = e.key, state = e.state, priority = e.priority, weight = e.weight, askedAt = e.askedAt, since = e.since, renewedAt = e.renewedAt, note = e.note }
end
local function entries(keys)
  local out = {}
  for from = 1, #keys, 500 do
    local part = { unpack(keys, from, math.min(#keys, from + 499)) }
    local raws = redis.call('HMGET', K.entries, unpack(part))
    for i = 1, #part do if raws[i] then out[#out + 1] = view(cjson.decode(raws[i])) end end
  end
  return out
end
-- The table: every holder when someone waits or the pool is over (the rules read them then), the first waiters.
local function tableOf(allHolders)
  local waiting = redis.call('ZCARD', K.queue)
  local holders = {}
  if allHolders or waiting > 0 or R.overSince ~= nil then holders = entries(redis.call('ZRANGE', K.holders, 0, -1)) end
  return { now = now, limit = R.limit or cjson.null, budgetKW = R.budgetKW or cjson.null, agingMs = R.agingMs, inUse = inUse(), usedKW = R.usedKW,
    waiting = waiting, overSince = R.overSince or cjson.null, holders = holders, head = entries(redis.call('ZRANGE', K.queue, 0, HEAD - 1)) }
end
`;
