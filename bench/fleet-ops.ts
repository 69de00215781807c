/**
 * What the replica coordination costs per operation against a local Redis,
 * and how long a takeover takes after kill -9 (docs/fleet.md, "Measured").
 * Not part of npm test or npm run bench yet (the lead wires coordination into
 * the client; the side-by-side with coordination on and off belongs there):
 *
 *   node scripts/build.js && node dist/bench/fleet-ops.js
 *
 * Starts its own redis-server (Debian's) on a free port. Prints medians and
 * the 90th percentile in µs, and the takeover times in ms.
 */
import { Fleet } from '../nodes/lib/fleet/fleet';
import { LEASES } from '../nodes/lib/fleet/leases/lease-batch';
import { claimCommand } from '../test/lib/fleet/fleet-fixture';
import { RedisServer } from '../test/redis-server';
import { spawnReplica, type OwnedReport } from '../test/lib/fleet/replica-process';
import type { ChildProcess } from 'node:child_process';
import { median, timeEach } from './measure';


async function operations(redis: RedisServer): Promise<void> {
  const fleet = new Fleet({ url: redis.url, fleetKey: 'bench-ops', cycleMs: 60_000 });
  await fleet.connection.open();
  const budget = fleet.budget(1e6);
  const own = fleet.scope<{ n: number }>('bench');
  const tokens = Array.from({ length: 100 }, (_, i) => `RFID-${i}`);
  const leaseKeys = tokens.map((t) => fleet.keys.scope('bench').lease(t));
  await own.add(tokens);
  fleet.kick();
  while (own.owned().length < 100) await new Promise((r) => setTimeout(r, 20));
  const local = async () => ({ accessToken: 'bench-token-value', expiresIn: 1800 });
  const identity = { tokenUrl: 'http://127.0.0.1/v1/token', clientId: 'bench', clientSecret: 'bench-secret', scope: '', tokenParams: [] };
  await fleet.tokens.fetch(local, identity);
  let n = 0;
  const rows: Array<[string, { median: number; p90: number }]> = [
    ['ping (the round trip itself)', await timeEach(2000, () => fleet.connection.run('ping', (r) => r.ping()))],
    ['budget take (uncontended)', await timeEach(2000, () => budget.tryTake())],
    ['lease renewal, 1 token', await timeEach(2000, () => fleet.connection.eval(LEASES.call({}, { replica: fleet.replicaId, leaseMs: 6000, wanted: 1 }, { keys: leaseKeys.slice(0, 1) })))],
    ['lease renewal, 100 tokens in one script', await timeEach(1000, () => fleet.connection.eval(LEASES.call({}, { replica: fleet.replicaId, leaseMs: 6000, wanted: 100 }, { keys: leaseKeys })))],
    ['state commit (compare-and-set)', await timeEach(2000, () => own.commit(tokens[0], { n: ++n }))],
    ['shared token read (hit)', await timeEach(2000, () => fleet.tokens.fetch(local, identity))],
    [
      'command claim + publish',
      await timeEach(1000, async () => {
        const c = await claimCommand(fleet, { action: 'START', token: `T-${++n}`, locationId: 'L', evseId: '1' }, 0);
        if (c.role === 'sender') await c.publish({ ok: true, result: { statusCode: 201 } });
      }),
    ],
  ];
  await fleet.close();
  console.log('| operation | median µs | p90 µs |\n|---|---:|---:|');
  for (const [name, r] of rows) console.log(`| ${name} | ${r.median.toFixed(0)} | ${r.p90.toFixed(0)} |`);
}

/** Three replica processes over 90 tokens; SIGKILL one; ms until the two others own every token. */
async function takeover(redis: RedisServer, cycleMs: number, leaseMs: number, run: number): Promise<number> {
  const tokens = Array.from({ length: 90 }, (_, i) => `RFID-${i}`);
  const task = { mode: 'watch' as const, url: redis.url, fleetKey: `bench-kill-${cycleMs}-${run}`, scope: 'bench', tokens, cycleMs, leaseMs };
  const owned = new Map<ChildProcess, string[]>();
  const children = [0, 1, 2].map(() => {
    const c = spawnReplica(task);
    c.on('message', (m: OwnedReport) => owned.set(c, m.owned));
    return c;
  });
  const once = (cs: ChildProcess[]) => {
    const all = cs.flatMap((c) => owned.get(c) ?? []);
    return cs.every((c) => (owned.get(c) ?? []).length > 0) && all.length === tokens.length && new Set(all).size === tokens.length;
  };
  try {
    while (!once(children)) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, Math.random() * cycleMs)); // a kill at any point of a cycle
    const t0 = performance.now();
    children[0].kill('SIGKILL');
    while (!once(children.slice(1))) await new Promise((r) => setTimeout(r, 5));
    return performance.now() - t0;
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}

async function main(): Promise<void> {
  // No persistence: Redis's default has no append-only file, and an fsync per write would be measured instead of us.
  const redis = await RedisServer.start({ persist: false });
  try {
    await operations(redis);
    for (const [cycleMs, leaseMs, runs] of [
      [200, 800, 7],
      [2000, 6000, 3],
    ]) {
      const ms: number[] = [];
      for (let i = 0; i < runs; i++) ms.push(await takeover(redis, cycleMs, leaseMs, i));
      console.log(`takeover after kill -9, cycle ${cycleMs} ms, lease ${leaseMs} ms (bound ${leaseMs + 2 * cycleMs} ms): median ${median(ms).toFixed(0)} ms, range ${Math.min(...ms).toFixed(0)}-${Math.max(...ms).toFixed(0)} ms over ${runs}`);
    }
  } finally {
    await redis.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
