/**
 * The nemesis's Redis (fleet-process-chaos.ts): one redis-server reached by
 * each replica through its own nemesis proxy, or a Sentinel deployment (a
 * primary, a replica, three sentinels) named by the redis-sentinel:// URL.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Replicas } from './fleet-replicas';
import type { RedisNemesis } from './redis-nemesis';
import { RedisServer } from './redis-server';
import { RedisSentinel } from './redis-sentinel';
import type { Topology } from './fleet-process-faults';

export const REDIS_PASSWORD = 'Nemesis-Redis-Pa55word';
export const SENTINEL_PASSWORD = 'Nemesis-Sentinel-Pa55word';

/** Replica i reaches Redis through its own proxy: its configuration's coordination URL says so. */
export function routeThrough(replicas: Replicas, i: number, url: string): void {
  const file = path.join(replicas.procs[i].dataDir, 'flows_cred.json');
  const creds = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, Record<string, unknown>>;
  for (const id of ['svc', 'svcD']) creds[id] = { ...creds[id], coordination: url };
  fs.writeFileSync(file, JSON.stringify(creds));
}

/** The Redis of a run: one server, or a Sentinel deployment. */
export class Deployment {
  private constructor(
    readonly single: RedisServer | null,
    readonly sentinel: RedisSentinel | null,
  ) {}

  static async start(topology: Topology): Promise<Deployment> {
    if (topology === 'single') return new Deployment(await RedisServer.start({ password: REDIS_PASSWORD, persist: false }), null);
    // A primary judged down after 4 s: longer than the write pause (2.5 s), which would otherwise fail it over by itself.
    return new Deployment(null, await RedisSentinel.start({ password: REDIS_PASSWORD, sentinelPassword: SENTINEL_PASSWORD, downAfterMs: 4000 }));
  }

  /** What the replicas' configurations name (through replica i's nemesis proxy, on one server). */
  urlFor(nemesis: RedisNemesis | undefined): string {
    if (this.sentinel) return this.sentinel.url();
    return (nemesis as RedisNemesis).urlFor((this.single as RedisServer).url);
  }

  /** The primary itself, for CLIENT PAUSE (as the sentinels last named it to the harness). */
  get primaryUrl(): string {
    return this.sentinel ? this.sentinel.primaryUrl : (this.single as RedisServer).url;
  }

  close(): Promise<void> {
    return this.single ? this.single.close() : (this.sentinel as RedisSentinel).close();
  }
}
