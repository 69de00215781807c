/**
 * The fleet's scripts called directly (scripts.test.ts, scripts-leases.test.ts):
 * one real redis-server for the file, a connection as the fleet opens it, an
 * admin client to look, and fresh keys for each test.
 */
import type { Redis } from 'ioredis';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { FleetKeys } from '../../../nodes/lib/fleet/redis/keys';
import { RedisServer, requireRedis } from '../../redis-server';

export interface ScriptSuite {
  redis: RedisServer;
  conn: FleetConnection;
  admin: Redis;
  /** a fleet key of its own for each test */
  keys: FleetKeys;
  /** Redis's TIME in ms */
  redisMs(): Promise<number>;
}

let count = 0;

export function scriptSuite(): ScriptSuite {
  const rs = {} as ScriptSuite;
  before(async function () {
    requireRedis(this);
    rs.redis = await RedisServer.start();
    rs.conn = new FleetConnection({ url: rs.redis.url, connectTimeoutMs: 2_000, commandTimeoutMs: 2_000 });
    await rs.conn.open();
    rs.admin = rs.redis.admin();
  });
  after(async () => {
    await rs.conn?.close();
    await rs.redis?.close();
  });
  beforeEach(() => {
    rs.keys = new FleetKeys(`scripts-${process.pid}-${++count}`);
  });
  rs.redisMs = async () => {
    const [s, us] = await rs.admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  return rs;
}
