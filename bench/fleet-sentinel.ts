/**
 * What Redis Sentinel costs the fleet's durable writes (docs/fleet.md,
 * "Sentinel"), side by side in one run: a state commit and a command claim
 * with its outcome, on one redis-server, on a Sentinel deployment whose
 * replica is in sync (the script and WAIT in one pipeline), and on the same
 * deployment with its replica stopped (the sentinels asked instead). And a
 * lease renewal (not durable) on both, as the control.
 *
 *   node scripts/build.js && node dist/bench/fleet-sentinel.js
 *
 * Starts its own redis-server processes (Debian's) on free loopback ports.
 * Prints medians and the 90th percentile in µs.
 */
import { Fleet } from '../nodes/lib/fleet/fleet';
import { LEASES } from '../nodes/lib/fleet/leases/lease-batch';
import { claimCommand } from '../test/lib/fleet/fleet-fixture';
import { RedisServer } from '../test/redis-server';
import { RedisSentinel } from '../test/redis-sentinel';
import { timeEach } from './measure';


type Row = Record<string, { median: number; p90: number }>;

async function measure(url: string, label: string, n: number): Promise<Row> {
  const fleet = new Fleet({ url, fleetKey: `bench-${label}`, cycleMs: 60_000 });
  try {
    await fleet.connection.open();
    const scope = fleet.scope<{ n: number }>('bench');
    await scope.add(['RFID-1']);
    fleet.kick();
    while (scope.owned().length < 1) await new Promise((r) => setTimeout(r, 20));
    const lease = [fleet.keys.scope('bench').lease('RFID-1')];
    let k = 0;
    return {
      'lease renewal (not durable)': await timeEach(n, () => fleet.connection.eval(LEASES.call({}, { replica: fleet.replicaId, leaseMs: 60_000, wanted: 1 }, { keys: lease }))),
      'state commit': await timeEach(n, () => scope.commit('RFID-1', { n: ++k })),
      'command claim + publish': await timeEach(Math.round(n / 2), async () => {
        const c = await claimCommand(fleet, { action: 'START', token: `T-${label}-${++k}`, locationId: 'L', evseId: '1' }, 0);
        if (c.role === 'sender') await c.publish({ ok: true, result: { statusCode: 201 } });
      }),
    };
  } finally {
    await fleet.close();
  }
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 1000);
  const single = await RedisServer.start({ persist: false });
  const sentinel = await RedisSentinel.start({ downAfterMs: 1000 });
  try {
    const columns: Array<[string, Row]> = [];
    columns.push(['one redis-server', await measure(single.url, 'single', n)]);
    columns.push(['Sentinel, replica in sync', await measure(sentinel.url(), 'sentinel', n)]);
    const replica = sentinel.nodes.find((x) => x.port !== sentinel.currentPrimary);
    await replica?.stop();
    // The sentinels judge it down after 1 s: from then on no WAIT, the sentinels asked for each durable write.
    await new Promise((r) => setTimeout(r, 3000));
    columns.push(['Sentinel, replica stopped', await measure(sentinel.url(), 'degraded', n)]);
    console.log(`median / p90 µs, ${n} calls each (claims: ${Math.round(n / 2)}), same machine, loopback`);
    console.log(`| operation | ${columns.map(([c]) => c).join(' | ')} |`);
    console.log(`|---|${columns.map(() => '---:').join('|')}|`);
    for (const op of Object.keys(columns[0][1])) console.log(`| ${op} | ${columns.map(([, r]) => `${Math.round(r[op].median)} / ${Math.round(r[op].p90)}`).join(' | ')} |`);
  } finally {
    await single.close();
    await sentinel.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
