/**
 * Who runs a lease scope (docs/fleet.md, "Leases and hand-over"): every cycle
 * a replica renews its membership of the scope (a sorted set scored on
 * Redis's clock: when its membership lapses) and reads the live members,
 * the list's version, and what says whether Redis lost its data (recovery.ts):
 * the scope's epoch, its loss mark and its restores counter. Rendezvous
 * hashing over the live members then says which items each should hold.
 */
import type { FleetConnection } from '../redis/connection';
import type { ScopeKeys } from '../redis/keys';
import { Script } from '../redis/script';

/**
 * A replica renews its membership (`leave` '1': it stands down, and is taken
 * out instead) and reads the scope. The epoch is written once, while the
 * scope's keys are empty: a replica that finds another epoch than the one it
 * saw (`epochSeen`) knows Redis lost its data meanwhile, however many others
 * saw it first. The first one back that had seen the old epoch writes the
 * loss mark: the members it saw before the loss (ARGV from REST_ARGS on),
 * for at most `markMs`. Returns {version or false, epoch, ms the loss mark
 * has left (negative: none), restores or false, live member ids…}.
 */
export const SCOPE_HEARTBEAT = new Script({
  name: 'scopeHeartbeat',
  keys: ['members', 'version', 'epoch', 'lossMark', 'restores'],
  args: ['replica', 'leaseMs', 'leave', 'epochSeen', 'markMs'],
  clock: true,
  lua: `
local _, nowMs, raw = redisTime()
local ttl = tonumber(A.leaseMs)
if A.leave == '1' then redis.call('ZREM', K.members, A.replica)
else redis.call('ZADD', K.members, nowMs + ttl, A.replica) end
redis.call('ZREMRANGEBYSCORE', K.members, '-inf', nowMs)
-- A scope nobody runs any more leaves nothing behind.
redis.call('PEXPIRE', K.members, ttl * 20)
local epoch = redis.call('GET', K.epoch)
if not epoch then
  epoch = raw[1] .. '.' .. raw[2] .. ':' .. A.replica
  redis.call('SET', K.epoch, epoch)
  if A.epochSeen ~= '' then
    redis.call('SADD', K.lossMark, A.replica, unpack(ARGV, REST_ARGS))
    redis.call('PEXPIRE', K.lossMark, A.markMs)
  end
end
local out = { redis.call('GET', K.version), epoch, redis.call('PTTL', K.lossMark), redis.call('GET', K.restores) }
local live = redis.call('ZRANGE', K.members, 0, -1)
for i = 1, #live do out[#out + 1] = live[i] end
return out`,
});

/** A replica leaves the scope (its node closed): the others take its items at their next cycle. */
export const SCOPE_LEAVE = new Script({
  name: 'scopeLeave',
  keys: ['members'],
  args: ['replica'],
  lua: `return redis.call('ZREM', K.members, A.replica)`,
});

export interface ScopeBeat {
  version: string | null;
  epoch: unknown;
  markLeftMs: unknown;
  restores: unknown;
  /** live members, sorted */
  live: string[];
}

export async function scopeHeartbeat(conn: FleetConnection, keys: ScopeKeys, me: { replica: string; leaseMs: number; leave: boolean }, loss: { epochSeen: string; markMs: number; members: string[] }): Promise<ScopeBeat> {
  const call = SCOPE_HEARTBEAT.call(
    { members: keys.members, version: keys.version, epoch: keys.epoch, lossMark: keys.lossMark, restores: keys.restores },
    { replica: me.replica, leaseMs: me.leaseMs, leave: me.leave ? '1' : '0', epochSeen: loss.epochSeen, markMs: loss.markMs },
    { args: loss.members },
  );
  const res = (await conn.eval(call)) as unknown[];
  return { version: typeof res[0] === 'string' ? res[0] : null, epoch: res[1], markLeftMs: res[2], restores: res[3], live: res.slice(4).map(String).sort() };
}
