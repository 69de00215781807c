/**
 * The fleet's members (docs/fleet.md, "Keys"): every cycle a replica says it
 * is alive and what it is (host, pid, items held, how its queries of the
 * service went), and reads who else is, on Redis's clock; a closing replica
 * leaves at once.
 */
import type { FleetConnection } from '../redis/connection';
import type { FleetKeys } from '../redis/keys';
import { Script } from '../redis/script';
import { parseReplicaInfo, type ReplicaInfo } from './replica-info';

/**
 * Renews the replica's membership (scored: when it lapses) and keeps its info
 * (an object's JSON; '' = none) with `at`, Redis's time of this heartbeat in
 * ms, as its first field: what a replica says of its last answer from the
 * service (service-reach.ts) is then placed on one clock for all. Prunes the
 * lapsed members. Returns {Redis's time in ms, id1, info1, id2, info2, …}.
 */
export const FLEET_HEARTBEAT = new Script({
  name: 'fleetHeartbeat',
  keys: ['replicas', 'info'],
  args: ['replica', 'leaseMs', 'info'],
  clock: true,
  lua: `
local _, nowMs = redisTime()
local ttl = tonumber(A.leaseMs)
redis.call('ZADD', K.replicas, nowMs + ttl, A.replica)
if string.sub(A.info, 1, 1) == '{' and string.len(A.info) > 2 then
  redis.call('HSET', K.info, A.replica, '{"at":' .. string.format('%.0f', nowMs) .. ',' .. string.sub(A.info, 2))
end
local dead = redis.call('ZRANGEBYSCORE', K.replicas, '-inf', nowMs)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', K.replicas, '-inf', nowMs)
  redis.call('HDEL', K.info, unpack(dead))
end
-- A fleet nobody runs any more leaves nothing behind.
redis.call('PEXPIRE', K.replicas, ttl * 20)
redis.call('PEXPIRE', K.info, ttl * 20)
local out = { nowMs }
local live = redis.call('ZRANGE', K.replicas, 0, -1)
for i = 1, #live do
  out[#out + 1] = live[i]
  out[#out + 1] = redis.call('HGET', K.info, live[i]) or ''
end
return out`,
});

/** The live members and their info, read only (Test connection: it never joins the fleet). Returns {id1, info1, …}. */
export const LIVE_MEMBERS = new Script({
  name: 'liveMembers',
  keys: ['replicas', 'info'],
  args: [],
  clock: true,
  lua: `
local _, nowMs = redisTime()
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.replicas, '(' .. string.format('%.0f', nowMs), '+inf')) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', K.info, id) or ''
end
return out`,
});

/** A replica leaves the fleet (it closes). */
export const FLEET_LEAVE = new Script({
  name: 'fleetLeave',
  keys: ['replicas', 'info'],
  args: ['replica'],
  lua: `
redis.call('ZREM', K.replicas, A.replica)
return redis.call('HDEL', K.info, A.replica)`,
});

export interface Beat {
  live: ReplicaInfo[];
  /** Redis's time in the answer (ms) */
  redisMs: number;
}

export class Membership {
  constructor(
    private readonly conn: FleetConnection,
    private readonly keys: FleetKeys,
    private readonly replica: string,
    private readonly leaseMs: number,
  ) {}

  async beat(info: Record<string, unknown>): Promise<Beat> {
    const call = FLEET_HEARTBEAT.call({ replicas: this.keys.replicas, info: this.keys.replicaInfo }, { replica: this.replica, leaseMs: this.leaseMs, info: JSON.stringify(info) });
    const res = (await this.conn.eval(call)) as unknown[];
    const live: ReplicaInfo[] = [];
    for (let i = 1; i + 1 < res.length; i += 2) live.push({ ...parseReplicaInfo(res[i + 1]), id: String(res[i]) });
    return { live, redisMs: Number(res[0]) };
  }

  leave(): Promise<unknown> {
    return this.conn.eval(FLEET_LEAVE.call({ replicas: this.keys.replicas, info: this.keys.replicaInfo }, { replica: this.replica }));
  }
}
