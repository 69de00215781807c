/**
 * `npm run soak -- --fleet --processes [--seeds 20] [--seconds 15] [--seed 1] [--redis single|sentinel]`:
 * the nemesis over three real Node-RED processes (test/fleet-process-chaos.ts),
 * one seeded schedule per seed from --seed on, each with its own simulator,
 * Redis and replicas, all on loopback: an odd seed on one redis-server (each
 * replica through its own nemesis proxy), an even seed on Redis Sentinel (a
 * primary, a replica, three sentinels: failovers and kill -9 of the primary),
 * unless --redis says one. Each schedule has every fault kind of its
 * deployment at least once and faults for at least --seconds.
 *
 * Prints each seed's verdict and figures, the schedule of a failing one, and
 * exits 1 when any seed broke a promise (test/fleet-process-invariants.ts), on
 * a crash of this process, or when the run outlives its bound.
 */
import { runProcessChaos } from '../test/fleet-process-chaos';
import type { Topology } from '../test/fleet-process-faults';
import { REDIS_SERVER } from '../test/redis-server';
import { guardSoak, type FleetSoakArgs } from './soak-fleet';

export async function soakFleetProcesses(args: FleetSoakArgs & { redis?: Topology }): Promise<void> {
  if (!REDIS_SERVER) throw new Error('--fleet --processes needs redis-server (apt-get install redis-server)');
  // A schedule takes its seconds, the faults each kind adds (about 130 s: the egress faults last until their replica stands down, a
  // failover waits for the demoted primary to be a replica again), the start of three Node-REDs and the settling (the depot's up to 40 s).
  const bound = args.seeds * (args.seconds + 240) + 60;
  const crashes = guardSoak(bound);
  let passed = 0;
  const totals: Record<string, number> = {};
  for (let seed = args.seed; seed < args.seed + args.seeds; seed++) {
    const began = Date.now();
    const redis: Topology = args.redis ?? (seed % 2 === 0 ? 'sentinel' : 'single');
    const report = await runProcessChaos({ seed, seconds: args.seconds, redis });
    for (const [k, v] of Object.entries(report.figures)) totals[k] = k.startsWith('longest') || k.startsWith('busiest') ? Math.max(totals[k] ?? -Infinity, v) : (totals[k] ?? 0) + v;
    const ok = report.violations.length === 0;
    if (ok) passed++;
    const faults = report.schedule.filter((l) => !/ inject | back$|settling|watching/.test(l)).length;
    console.log(`seed ${seed} (${redis}): ${ok ? 'ok' : 'FAILED'} in ${Math.round((Date.now() - began) / 1000)} s, ${faults} faults, ${JSON.stringify(report.figures)}`);
    if (!ok) console.log(`  ${report.violations.join('\n  ')}\n  schedule:\n    ${report.schedule.join('\n    ')}`);
  }
  for (const c of crashes) console.log(`crash: ${c}`);
  const ok = passed === args.seeds && crashes.length === 0;
  console.log(`${passed}/${args.seeds} seeds passed; over all seeds: ${JSON.stringify(totals)}`);
  console.log(ok ? 'SOAK PASSED' : 'SOAK FAILED');
  process.exit(ok ? 0 : 1);
}
