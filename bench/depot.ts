/**
 * A depot's cost, side by side (`npm run bench -- --depot`): CPU per
 * charging-control check with and without a depot, 1 000 connectors in one
 * node and, with the depot, all in one depot (limit 600: 600 hold a slot,
 * 400 wait in its queue), the process alone (the local grants in memory
 * context). Three processes, each a real Node-RED: `off` (no depot), `offB`
 * (the same: the A/A, the method's own noise) and `on`, each checking its own
 * connectors (counted apart at the bench server), every window opened and
 * closed for all three at once, each role in another process in each window.
 * Goal: on/off at most 1.10.
 *
 * The forked side is this file too: fork('depot.js'), then IPC.
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { EmbeddedNodeRed, type FlowNode } from './runtime';
import { ChildCalls, serve } from './ipc';
import { BenchContext, median, spread } from './measure';
import { QUICK } from './options';
import { RedisServer, REDIS_SERVER } from '../test/redis-server';
import { GRANT_SYNC } from '../nodes/lib/fleet/grants/grant-scripts';

const CHECK_SEC = 10;
const LIMIT = 600;
const N = 1000;
/** every connector started or queued, and checked at its interval since */
const SETTLE_MS = (2 * CHECK_SEC + 5) * 1000;

type Kind = 'off' | 'on';
export type DepotCommand =
  | { cmd: 'init'; base: string }
  | { cmd: 'start'; kind: Kind; n: number; prefix: string; seq: number; redisUrl?: string }
  | { cmd: 'begin' }
  | { cmd: 'end' }
  | { cmd: 'stop' }
  | { cmd: 'exit' };

// ------------------------------------------------------------------ the contender process

let red: EmbeddedNodeRed | null = null;
let base = '';
let cpu0: NodeJS.CpuUsage | undefined;

/** A control node for n connectors (msg.target), with a depot of its own for `on` (a new id per window: nothing left from the last); with `redisUrl`, coordinated through it. */
function flow(kind: Kind, seq: number, redisUrl?: string): FlowNode[] {
  const credentials = { clientId: 'bench', clientSecret: 'bench-secret', ...(redisUrl ? { coordination: redisUrl } : {}) };
  return [
    { id: 'tab', type: 'tab', label: 'depot' },
    { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, maxInFlight: 64, ...(redisUrl ? { fleetKey: `bench-depot-${seq}` } : {}), credentials },
    ...(kind === 'on' ? [{ id: `dep-${seq}`, type: 'charging-depot', limit: LIMIT, minRun: 600, turn: 0 }] : []),
    { id: 'c', type: 'charging-control', z: 'tab', service: 'svc', ...(kind === 'on' ? { depot: `dep-${seq}` } : {}), locationId: '', evseId: '', token: '', guard: 0, checkInterval: CHECK_SEC, waitTimeout: 60, startAttempts: 2, wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ];
}

async function handle(m: DepotCommand): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case 'init':
      base = m.base;
      red = await EmbeddedNodeRed.start({ chargingSession: { minPollIntervalSec: 1 } });
      red.onSink(() => undefined);
      return {};
    case 'start': {
      await red!.deploy(flow(m.kind, m.seq, m.redisUrl));
      const c = red!.node('c');
      // Spread over a check interval, as wishes come in a depot (and so that the checks are spread too).
      for (let i = 0; i < m.n; i++) setTimeout(() => c.receive({ payload: true, target: { locationId: 'LOC-1', evseId: '1', token: `${m.prefix}-s-${i}` } }), (i * CHECK_SEC * 1000) / m.n);
      return {};
    }
    case 'begin':
      cpu0 = process.cpuUsage();
      return {};
    case 'end': {
      const cpu = process.cpuUsage(cpu0);
      return { cpuMs: (cpu.user + cpu.system) / 1000 };
    }
    case 'stop':
      await red!.deploy([{ id: 'tab', type: 'tab', label: 'depot' }]);
      await new Promise((r) => setTimeout(r, 500));
      return {};
    case 'exit':
      await red?.stop();
      setImmediate(() => process.exit(0));
      return {};
  }
}

if (require.main === module) serve(handle);

// ------------------------------------------------------------------ the parent side

const ROLES = [
  { role: 'off', kind: 'off', prefix: 'O' },
  { role: 'offB', kind: 'off', prefix: 'P' },
  { role: 'on', kind: 'on', prefix: 'D' },
] as const;
type Role = (typeof ROLES)[number]['role'];
/** Process i runs role (i + s·w) mod 3 in window w (s = 1, then 2): each role in each process once per rotation. */
const seatOf = (i: number, w: number) => ROLES[(i + (1 + (Math.floor(w / ROLES.length) % 2)) * w) % ROLES.length];

export async function depotSection(ctx: BenchContext): Promise<string> {
  const procs = await Promise.all(
    ROLES.map(async () => {
      const p = new ChildCalls<DepotCommand>(fork(path.join(__dirname, 'depot.js'), { execArgv: ['--expose-gc'] }));
      await p.call({ cmd: 'init', base: ctx.server.base });
      return p;
    }),
  );
  const all = (m: DepotCommand) => Promise.all(procs.map((p) => p.call(m)));
  let seq = 0;
  const startAll = (w: number) => {
    seq++;
    return Promise.all(procs.map((p, i) => p.call({ cmd: 'start', kind: seatOf(i, w).kind, n: N, prefix: seatOf(i, w).prefix, seq })));
  };
  const window = async (ms: number) => {
    const g0 = await ctx.server.getsBy();
    await all({ cmd: 'begin' });
    await new Promise((r) => setTimeout(r, ms));
    const ends = await all({ cmd: 'end' });
    const g1 = await ctx.server.getsBy();
    return { cpuMs: ends.map((e) => e.cpuMs), checks: Object.fromEntries(ROLES.map((c) => [c.prefix, (g1[c.prefix] ?? 0) - (g0[c.prefix] ?? 0)])) };
  };
  try {
    const idleMs = QUICK ? 1000 : 2500;
    const idle: Array<{ cpuMs: number[] }> = [];
    for (let q = 0; q < 3; q++) idle.push(await window(idleMs));
    const idleCpuPerSec = procs.map((_, i) => median(idle.map((w) => w.cpuMs[i])) / (idleMs / 1000));
    // Warm-up: every process runs every role's code for a while.
    for (let w = 0; w < (QUICK ? 1 : ROLES.length); w++) {
      await startAll(w);
      await new Promise((r) => setTimeout(r, QUICK ? 5000 : SETTLE_MS));
      await all({ cmd: 'stop' });
    }
    const windows = QUICK ? ROLES.length : 2 * ROLES.length;
    const windowMs = QUICK ? 5000 : 20_000;
    const cpu: Record<Role, number[]> = { off: [], offB: [], on: [] };
    const checks: Record<Role, number[]> = { off: [], offB: [], on: [] };
    for (let w = 0; w < windows; w++) {
      await startAll(w);
      await new Promise((r) => setTimeout(r, QUICK ? 12_000 : SETTLE_MS));
      const got = await window(windowMs);
      await all({ cmd: 'stop' });
      procs.forEach((_, i) => {
        const c = seatOf(i, w);
        cpu[c.role].push(got.cpuMs[i] - (idleCpuPerSec[i] * windowMs) / 1000);
        checks[c.role].push(got.checks[c.prefix]);
      });
      console.log(`depot window ${w + 1}: ${ROLES.map((c) => `${c.role} ${((cpu[c.role][w] * 1000) / Math.max(1, checks[c.role][w])).toFixed(0)} µs/check (${checks[c.role][w]} checks)`).join(', ')}`);
    }
    const per = (r: Role, w: number) => (cpu[r][w] * 1000) / Math.max(1, checks[r][w]);
    const inAll = (r: Role) => (cpu[r].reduce((a, b) => a + b, 0) * 1000) / Math.max(1, checks[r].reduce((a, b) => a + b, 0));
    const idx = Array.from({ length: windows }, (_, w) => w);
    const onOff = idx.map((w) => per('on', w) / per('off', w));
    const aa = idx.map((w) => per('offB', w) / per('off', w));
    const offPool = (inAll('off') + inAll('offB')) / 2;
    const expected = (N * windowMs) / 1000 / CHECK_SEC;
    const trips = await roundTrips(procs[0], ctx);
    return [
      `### Depot: CPU per control check, without and with a depot (${N} connectors, one depot)`,
      '',
      `Three processes, each a real Node-RED (bench/depot.ts): one charging-control node checking ${N} connectors of its own every ${CHECK_SEC} s (msg.target; the bench server gives a connector a session once its START came), without a depot (\`off\`, and \`offB\`: the A/A) or with a charging-depot of limit ${LIMIT} (\`on\`: ${LIMIT} hold a slot and renew it at each check, ${N - LIMIT} wait in the queue and ask at each check; the grants are the local pool in memory, written to the default context store on each change). All three started together, settled ${SETTLE_MS / 1000} s, then measured over the same ${windowMs / 1000} s; each role in another process in each window. CPU per check: the process's CPU over the window less its idle CPU (${idleCpuPerSec.map((x) => x.toFixed(1)).join(' / ')} ms/s), over the checks the server counted (one progress query each). Ratios per window, median [min–max].`,
      '',
      '| connectors | windows × s | off µs/check | offB µs/check | on µs/check | **on/off** (per window) | A/A offB/off | on − off µs/check | checks per connector-interval off / on |',
      '|---|---|---|---|---|---|---|---|---|',
      `| ${N} | ${windows} × ${windowMs / 1000} | ${inAll('off').toFixed(0)} | ${inAll('offB').toFixed(0)} | ${inAll('on').toFixed(0)} | **${spread(onOff)}** | ${spread(aa)} | ${(inAll('on') - offPool).toFixed(0)} | ${((checks.off.reduce((a, b) => a + b, 0) / windows) / expected).toFixed(3)} / ${((checks.on.reduce((a, b) => a + b, 0) / windows) / expected).toFixed(3)} |`,
      '',
      trips,
    ].join('\n');
  } finally {
    await Promise.all(procs.map((p) => p.exit()));
  }
}

/**
 * With *Coordinate replicas*: the depot's round trips to Redis per control
 * check. One process, ROUND_TRIP_N connectors on a depot in Redis (Debian's
 * redis-server on a free port), every script Redis runs seen with MONITOR over
 * a window: the grant scripts (GRANT_SYNC) over the checks the server counted.
 */
const ROUND_TRIP_N = 100;

async function roundTrips(proc: ChildCalls<DepotCommand>, ctx: BenchContext): Promise<string> {
  if (!REDIS_SERVER) return 'Redis round trips per check with replicas: not measured (redis-server is not installed).';
  const redis = await RedisServer.start({ persist: false });
  try {
    await proc.call({ cmd: 'start', kind: 'on', n: ROUND_TRIP_N, prefix: 'R', seq: 9_999, redisUrl: redis.url });
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const scripts = { grant: 0, other: 0, commands: 0 };
    const monitor = await redis.monitor((args) => {
      const cmd = args[0]?.toLowerCase();
      scripts.commands++;
      if (cmd === 'evalsha' || cmd === 'eval') scripts[args[1] === GRANT_SYNC.sha ? 'grant' : 'other']++;
    });
    const g0 = (await ctx.server.getsBy())['R'] ?? 0;
    await new Promise((r) => setTimeout(r, QUICK ? 10_000 : 30_000));
    const g1 = (await ctx.server.getsBy())['R'] ?? 0;
    monitor.close();
    await proc.call({ cmd: 'stop' });
    const checks = Math.max(1, g1 - g0);
    return [
      '',
      `With *Coordinate replicas* (one process, ${ROUND_TRIP_N} connectors on a depot of limit ${LIMIT} in Redis, ${QUICK ? 10 : 30} s seen with MONITOR): **${(scripts.grant / checks).toFixed(2)} grant scripts (round trips to the depot) per control check** (${scripts.grant} over ${checks} checks); the control's own lease, commit and heartbeat scripts beside them: ${(scripts.other / checks).toFixed(2)} per check.`,
    ].join('\n');
  } finally {
    await redis.close();
  }
}
