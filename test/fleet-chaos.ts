/**
 * A seeded random schedule of Redis faults over two replicas, with the
 * promises checked from outside (the simulator's door and the events both
 * replicas emit). Used by test/lib/fleet/chaos.test.ts (a few short seeds)
 * and `npm run soak -- --fleet` (many longer ones).
 *
 * Each replica is what a Node-RED process with *Coordinate replicas* runs, in
 * this process: its own Fleet (connection, replica id) through its own
 * nemesis proxy, its own ServiceClient to the simulator over HTTP, a
 * SessionWatcher on the fleet's watch list (mayPoll and commit through the
 * ownership, as nodes/lib/fleet/watch-link.ts wires them), and commands through the fleet's
 * dedup (as send-once.ts through RedisCoordination). An inject fires on both replicas at once.
 *
 * Faults, at random: replies withheld then the connection reset (a lost
 * reply), a black hole (a silent partition shorter or longer than the lease),
 * a reset, `CLIENT PAUSE … WRITE` (a failover's pause). Invariants: every
 * injected START and STOP arrives at the service exactly once, no command
 * arrives that nobody injected, every session's `started` and `ended` is
 * emitted exactly once across the replicas.
 */
import { Fleet } from '../nodes/lib/fleet/fleet';
import type { RedisLeaseScope } from '../nodes/lib/fleet/leases/lease-scope';
import type { ServiceClient } from '../nodes/lib/client/service-client';
import { startCommand, stopCommand, type ChargingCommand } from '../nodes/lib/session/commands';
import { SessionWatcher, type SavedState, type WatchEvent } from '../nodes/lib/session/watcher';
import type { ChargingServiceSimulator } from '../simulator/simulator';
import { clientFor, startSimulator } from './harness';
import { pauseWrites, RedisNemesis } from './redis-nemesis';
import type { RedisServer } from './redis-server';
import { runCommand } from './lib/fleet/fleet-fixture';

export interface ChaosOptions {
  seed: number;
  /** how long faults and injects go on (then everything heals and settles) */
  seconds: number;
  /** tokens (charge points) the schedule starts and stops sessions on */
  tokens?: number;
}

export interface ChaosReport {
  seed: number;
  violations: string[];
  starts: number;
  stops: number;
  faults: string[];
}

const FAST = { cycleMs: 150, leaseMs: 600, commandTimeoutMs: 400, connectTimeoutMs: 1_000 };

/** Deterministic numbers in [0, 1) from a seed (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Replica {
  fleet: Fleet;
  nemesis: RedisNemesis;
  client: ServiceClient;
  watcher: SessionWatcher;
  own: RedisLeaseScope<SavedState>;
}

export async function runFleetChaos(redis: RedisServer, options: ChaosOptions): Promise<ChaosReport> {
  const rnd = seeded(options.seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
  const tokens = Array.from({ length: options.tokens ?? 4 }, (_, i) => `CHAOS-${options.seed}-${i}`);
  const fleetKey = `chaos-${process.pid}-${options.seed}-${Date.now()}`;
  const sim = await startSimulator();
  const events: WatchEvent[] = [];
  const replicas: Replica[] = [];
  const faults: string[] = [];
  const violations: string[] = [];
  const pending = new Set<Promise<unknown>>();
  /** every session the injects made, by transactionId */
  const sessions = new Map<string, { token: string; stopped: boolean }>();
  /** what each replica's run() said, for a failing seed's message */
  const roles: string[] = [];
  let starts = 0;
  let stops = 0;
  try {
    for (let i = 0; i < 2; i++) replicas.push(await replica(redis, sim, fleetKey, events));
    await replicas[0].own.add(tokens);
    const end = Date.now() + options.seconds * 1000;
    // A token is busy while a command on it is under way, and for a while after, so that each session lasts
    // longer than a hand-over (a session begun and ended while no replica polls is not seen: polling's limit).
    const busyUntil = new Map<string, number>();
    const asked = new Map<string, number>();
    // Faults all the time, on their own schedule, overlapping the commands and the watch's commits.
    const faulting = (async () => {
      while (Date.now() < end) {
        faults.push(await fault(rnd, pick, replicas, redis));
        await sleep(rnd() * 300);
      }
    })();
    while (Date.now() < end) {
      if (rnd() < 0.7) {
        const token = pick(tokens.filter((t) => (busyUntil.get(t) ?? 0) <= Date.now()).concat(['']));
        if (!token) continue;
        busyUntil.set(token, Infinity);
        const live = sim.session(token);
        const cmd: ChargingCommand = live && live.stoppedAt === null ? stopCommand({ locationId: 'L', evseId: token, token, transactionId: live.transactionId }) : startCommand({ locationId: 'L', evseId: token, token });
        const key = cmd.action === 'START' ? `START ${token}|L|${token}` : `STOP ${live?.transactionId}`;
        asked.set(key, (asked.get(key) ?? 0) + 1);
        if (cmd.action === 'START') starts++;
        else {
          stops++;
          const known = sessions.get(String(live?.transactionId));
          if (known) known.stopped = true;
        }
        // Often a fault right as the command goes out: its claim's answer lost, or a write pause.
        if (rnd() < 0.4) void fault(rnd, pick, replicas, redis).then((f) => faults.push(`${f} at ${cmd.action}`));
        const both = Promise.allSettled(replicas.map((x) => runCommand(x.fleet, cmd, () => x.client.sendCommand(cmd), 8_000, (e) => roles.push(`${key} unguarded: ${e.message}`)))).then((rs) => {
          roles.push(`${key}: ${rs.map((r) => (r.status === 'fulfilled' ? r.value.role : `error ${(r.reason as Error).message}`)).join(' / ')}`);
          const now = sim.session(token);
          if (cmd.action === 'START' && now) sessions.set(now.transactionId, { token, stopped: false });
          busyUntil.set(token, Date.now() + 2_500);
        });
        pending.add(both);
        void both.finally(() => pending.delete(both));
      }
      await sleep(100 + rnd() * 300);
    }
    await faulting;
    for (const x of replicas) x.nemesis.heal();
    await Promise.all([...pending]);
    // Settle: every session is reported as it is now (started, or ended) within a few rounds.
    await sleep(4_000);
    check(sim, asked, sessions, events, violations, cutOffPastLease(faults));
    if (violations.length > 0) violations.push(...roles);
  } finally {
    for (const x of replicas) {
      x.watcher.close();
      await x.fleet.close();
      await x.client.close();
      await x.nemesis.close();
    }
    await sim.stop();
  }
  return { seed: options.seed, violations, starts, stops, faults };
}

async function replica(redis: RedisServer, sim: ChargingServiceSimulator, fleetKey: string, events: WatchEvent[]): Promise<Replica> {
  const nemesis = await RedisNemesis.start(redis.port);
  const fleet = new Fleet({ url: nemesis.urlFor(redis.url), fleetKey, ...FAST });
  await fleet.connection.open();
  const client = clientFor(sim, { timeoutMs: 5_000 });
  let watcher: SessionWatcher | null = null;
  const own = fleet.scope<SavedState>('w', {
    onChange: (ch) => {
      if (ch.released.length > 0) watcher?.unwatch(ch.released.map((r) => r.item));
      if (ch.acquired.length > 0) {
        const saved = new Map(ch.acquired.map((a) => [a.item, a.saved?.state ?? undefined]));
        watcher?.watch(saved.keys(), (t) => saved.get(t));
      }
    },
  });
  watcher = new SessionWatcher(
    (t) => client.getProgress(t).then((r) => r.record),
    { intervalMs: 200, confirmEndMs: 50, mayPoll: (t) => own.holds(t), commit: (t, s) => own.commit(t, s).then((r) => r.ok) },
    (e) => events.push(e),
    () => undefined,
  );
  return { fleet, nemesis, client, watcher, own };
}

/** One fault, healed before it returns (a pause heals itself). */
async function fault(rnd: () => number, pick: <T>(xs: T[]) => T, replicas: Replica[], redis: RedisServer): Promise<string> {
  const x = pick(replicas);
  const which = replicas.indexOf(x);
  const kind = pick(['lost-reply', 'lost-reply', 'blackhole', 'reset', 'pause']);
  const ms = Math.round(100 + rnd() * 1_100);
  if (kind === 'pause') {
    await pauseWrites(redis.url, ms).catch(() => undefined);
    return `pause ${ms} ms`;
  }
  if (kind === 'reset') {
    x.nemesis.reset();
    return `reset ${which}`;
  }
  if (kind === 'lost-reply') x.nemesis.withhold();
  else x.nemesis.blackhole();
  await sleep(kind === 'lost-reply' ? Math.min(ms, 300) : ms);
  x.nemesis.heal();
  return `${kind} ${which} ${ms} ms`;
}

/** The promises, from outside: the simulator's door and the events emitted. */
/**
 * A replica cut off from Redis for longer than a lease (a black hole) looks
 * gone to the others: a STOP it claimed is sent again by them, by design (a
 * STOP that did not stop is worse than a STOP sent twice); a START never is.
 */
function cutOffPastLease(faults: string[]): boolean {
  return faults.some((f) => {
    const m = /^blackhole \d+ (\d+) ms/.exec(f);
    return m !== null && Number(m[1]) > FAST.leaseMs;
  });
}

function check(sim: ChargingServiceSimulator, asked: Map<string, number>, sessions: Map<string, { token: string; stopped: boolean }>, events: WatchEvent[], violations: string[], stopMayRepeat: boolean): void {
  let total = 0;
  let repeatedStops = 0;
  for (const [key, n] of asked) {
    total += n;
    const [action, id] = key.split(' ') as ['START' | 'STOP', string];
    const arrived = sim.arrivals(action, id);
    if (action === 'STOP' && stopMayRepeat && arrived === n + 1) repeatedStops++;
    else if (arrived !== n) violations.push(`${key}: injected ${n} times, arrived ${arrived} times`);
  }
  const arrivals = sim.counters.startArrivals + sim.counters.stopArrivals;
  if (arrivals !== total + repeatedStops) violations.push(`${arrivals} commands arrived for ${total} injected`);
  const count = (kind: string, tx: string) => events.filter((e) => e.event === kind && String(e.session?.transactionId) === tx).length;
  for (const [tx, s] of sessions) {
    const started = count('started', tx);
    const ended = count('ended', tx);
    const seen = events.filter((e) => e.token === s.token).map((e) => `${e.event} ${String(e.session?.transactionId)}`);
    if (started !== 1) violations.push(`session ${tx} (${s.token}): started emitted ${started} times; ${s.token}: ${seen.join(', ')}`);
    if (ended !== (s.stopped ? 1 : 0)) violations.push(`session ${tx} (${s.token}, ${s.stopped ? 'stopped' : 'charging'}): ended emitted ${ended} times`);
  }
}
