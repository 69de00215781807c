/**
 * The scripts of a claim (claims.ts). A claim's value is "<claimant>\n"
 * while its work runs, "<claimant>\n<ms on Redis's clock> <outcome JSON>"
 * once its outcome is published; the claimant is "<attempt>:<replica id>",
 * a random attempt id per claim.
 */
import { Script } from '../redis/script';

/**
 * Claims a key, or reads back a claim whose answer was lost: one call does
 * both, so a retry is the same call. KEYS: the claim, the fleet's replicas
 * (sorted set: id -> when its heartbeat lapses). `sinceFirstMs`: ms since the
 * claimer's first try; `takeOver` '1' when a claim still being worked on may
 * be taken over from a replica that has left the fleet (the caller's policy,
 * asked only once it has seen the claimer missing long enough), and how old
 * (ms, from its time to live) such a claim must be (`minAgeMs`). Returns 'OK'
 * when the claim is now the caller's, else {the value held (the caller's own
 * claimant in it: its earlier try landed), 1 when its claimer is among the
 * live replicas (or it holds an outcome), else 0}. An outcome published more
 * than `windowMs` before the caller's first try is finished work: claimed
 * anew. A claimer held up by a fault still sees the outcome of the work it
 * raced with. The first try is placed on Redis's clock at the earliest of
 * two: `sinceFirstMs` before the script runs (no skew, but late when the
 * script waited in Redis: a write pause holds it after it was sent), and
 * `firstAtLeastMs` when the caller has seen Redis's clock (its heartbeat's
 * answer: Redis's time then, at least, plus the time since; '' when not).
 */
export const CLAIM = new Script({
  name: 'claim',
  durable: true,
  keys: ['claim', 'replicas'],
  args: ['claimant', 'claimMs', 'sinceFirstMs', 'firstAtLeastMs', 'windowMs', 'takeOver', 'minAgeMs'],
  clock: true,
  lua: `
local _, nowMs = redisTime()
local v = redis.call('GET', K.claim)
if v then
  local at = tonumber(string.match(v, '\\n(%d+) '))
  if at then
    local first = nowMs - tonumber(A.sinceFirstMs)
    if A.firstAtLeastMs ~= '' then first = math.min(first, tonumber(A.firstAtLeastMs)) end
    if at + tonumber(A.windowMs) > first then return { v, 1 } end
  else
    local holder = string.match(v, '^[^:\\n]*:([^\\n]*)')
    local lapses = holder and redis.call('ZSCORE', K.replicas, holder)
    if lapses and tonumber(lapses) > nowMs then return { v, 1 } end
    if A.takeOver ~= '1' then return { v, 0 } end
    if tonumber(A.claimMs) - redis.call('PTTL', K.claim) < tonumber(A.minAgeMs) then return { v, 0 } end
  end
end
redis.call('SET', K.claim, A.claimant .. '\\n', 'PX', A.claimMs)
return 'OK'`,
});

/** The claimer publishes its outcome under its claim, if the claim is still its own. Returns 1, or 0 when the claim was lost. */
export const PUBLISH = new Script({
  name: 'publish',
  durable: true,
  keys: ['claim'],
  args: ['claimant', 'outcome', 'keepMs'],
  clock: true,
  lua: `
local _, nowMs = redisTime()
local v = redis.call('GET', K.claim)
if not v or string.sub(v, 1, #A.claimant + 1) ~= A.claimant .. '\\n' then return 0 end
redis.call('SET', K.claim, A.claimant .. '\\n' .. nowMs .. ' ' .. A.outcome, 'PX', A.keepMs)
return 1`,
});
