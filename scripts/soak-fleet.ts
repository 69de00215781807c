/**
 * The fleet rotation of the soak (`npm run soak -- --fleet [--seeds 20]
 * [--seconds 15] [--seed 1]`): seeded random Redis faults (lost replies, black
 * holes, resets, CLIENT PAUSE WRITE) over two replicas while START and STOP
 * are injected on both and the watch runs (test/fleet-chaos.ts), one schedule
 * per seed from --seed on, --seconds each, against one redis-server and a
 * simulator per schedule, all on loopback.
 *
 * Fails (exit 1) when a schedule breaks a promise: an injected command that
 * did not arrive exactly once, a command nobody injected, a started or ended
 * not emitted exactly once; or on a crash, or when the run outlives its bound.
 */
import { runFleetChaos } from '../test/fleet-chaos';
import { RedisServer, REDIS_SERVER } from '../test/redis-server';

export interface FleetSoakArgs {
  seeds: number;
  seconds: number;
  seed: number;
}

/**
 * A soak's watchdog and crash log: the run fails if it outlives `boundSec`,
 * and every uncaught error of this process is collected (the caller fails the
 * run on any) instead of ending it before the verdict is printed.
 */
export function guardSoak(boundSec: number): string[] {
  setTimeout(() => {
    console.error(`SOAK FAILED: still running ${boundSec} s after it started`);
    process.exit(1);
  }, boundSec * 1000).unref();
  const crashes: string[] = [];
  process.on('uncaughtException', (e) => crashes.push(String(e?.stack ?? e)));
  process.on('unhandledRejection', (e) => crashes.push(String((e as Error)?.stack ?? e)));
  return crashes;
}

export async function soakFleet(args: FleetSoakArgs): Promise<void> {
  if (!REDIS_SERVER) throw new Error('--fleet needs redis-server (apt-get install redis-server)');
  const bound = args.seeds * (args.seconds + 30) + 60;
  const crashes = guardSoak(bound);
  const redis = await RedisServer.start();
  let passed = 0;
  let commands = 0;
  let faults = 0;
  try {
    for (let seed = args.seed; seed < args.seed + args.seeds; seed++) {
      const report = await runFleetChaos(redis, { seed, seconds: args.seconds });
      commands += report.starts + report.stops;
      faults += report.faults.length;
      if (report.violations.length === 0) passed++;
      console.log(`seed ${seed}: ${report.starts} STARTs, ${report.stops} STOPs, ${report.faults.length} faults: ${report.violations.length === 0 ? 'ok' : `FAILED\n  ${report.violations.join('\n  ')}\n  faults: ${report.faults.join(', ')}`}`);
    }
  } finally {
    await redis.close();
  }
  for (const c of crashes) console.log(`crash: ${c}`);
  const ok = passed === args.seeds && crashes.length === 0;
  console.log(`${passed}/${args.seeds} seeds passed (${commands} commands injected on both replicas, ${faults} faults)`);
  console.log(ok ? 'SOAK PASSED' : 'SOAK FAILED');
  process.exit(ok ? 0 : 1);
}
