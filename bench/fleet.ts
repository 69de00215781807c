/**
 * Coordinate replicas, on vs off, side by side (`npm run bench -- --fleet`,
 * issue 35): what coordination costs one Node-RED replica, measured against a
 * Debian redis-server this section starts itself (no persistence, loopback).
 *
 * 1. Watch mode, N tokens at a 10 s interval (every poll a change: the bench
 *    server's meter moves on every query, so every poll commits its state to
 *    Redis before it emits). Three processes, each a real Node-RED with the
 *    same flow (a watch node on a configuration without coordination and one on
 *    a configuration with it, each process its own fleet key, so that it is the
 *    only replica and owns every token): off, offB (the A/A) and on poll at the
 *    same time, every window opened and closed for all three together, each in
 *    another process in every window (as in the watch section, bench/watch-bench.ts).
 * 2. Progress queries driven with msg input at concurrency 10 in this process
 *    (CPU of the runtime, as section 1, bench/query-bench.ts): without Max requests per
 *    second, on vs off (nothing of the fleet on the path but its token, cached);
 *    with it at 10 000/s, on vs off (the fleet budget: one Redis round trip per
 *    request).
 *
 * The forked side of part 1 is this file too: fork('fleet.js'), then IPC.
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { EmbeddedNodeRed, type FlowNode } from './runtime';
import type { Drive } from './floor';
import { ChildCalls, serve } from './ipc';
import { BenchContext, closedLoop, median, Sample, spread } from './measure';
import { QUICK } from './options';
import { REDIS_SERVER, RedisServer } from '../test/redis-server';

const INTERVAL_SEC = 10;
/** every token polled once (its first-poll `started`) and, with coordination, the leases taken at the fleet's next cycle (2 s) */
const SETTLE_MS = (INTERVAL_SEC + 2) * 1000;

// ------------------------------------------------------------------ the contender process (part 1)

type Kind = 'off' | 'on';
export type FleetCommand =
  | { cmd: 'init'; base: string; redisUrl: string; fleetKey: string }
  | { cmd: 'start'; kind: Kind; n: number; prefix: string }
  | { cmd: 'begin' }
  | { cmd: 'end' }
  | { cmd: 'stop' }
  | { cmd: 'exit' };

const svc = (base: string, id: string, extra: Record<string, unknown> = {}, creds: Record<string, string> = {}): FlowNode => ({
  id,
  type: 'charging-service',
  baseUrl: base,
  authUrl: `${base}/auth`,
  scope: '',
  timeout: 10,
  ...extra,
  credentials: { clientId: 'bench', clientSecret: 'bench-secret', ...creds },
});

/** The same flow in every process: a watch node without coordination (w-off) and one with it (w-on), idle until told. */
function watchFlow(base: string, redisUrl: string, fleetKey: string): FlowNode[] {
  const watch = (id: string, service: string) => ({ id, type: 'charging-progress', z: 'tab', service, mode: 'watch', interval: INTERVAL_SEC, wires: [['sink']] });
  return [
    { id: 'tab', type: 'tab', label: 'fleet' },
    svc(base, 'svc-off'),
    svc(base, 'svc-on', { fleetKey }, { coordination: redisUrl }),
    watch('w-off', 'svc-off'),
    watch('w-on', 'svc-on'),
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ];
}

let red: EmbeddedNodeRed | null = null;
let cpu0: NodeJS.CpuUsage | undefined;
let emitted = 0;
let emitted0 = 0;
let running: Kind | null = null;

async function handle(m: FleetCommand): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case 'init':
      red = await EmbeddedNodeRed.start();
      red.onSink(() => void emitted++);
      await red.deploy(watchFlow(m.base, m.redisUrl, m.fleetKey));
      return {};
    case 'start':
      running = m.kind;
      red!.node(`w-${m.kind}`).receive({ topic: 'watch', payload: Array.from({ length: m.n }, (_, i) => `${m.prefix}${i}`) });
      return {};
    case 'begin':
      cpu0 = process.cpuUsage();
      emitted0 = emitted;
      return {};
    case 'end': {
      const cpu = process.cpuUsage(cpu0);
      return { cpuMs: (cpu.user + cpu.system) / 1000, emitted: emitted - emitted0 };
    }
    case 'stop':
      if (running) red!.node(`w-${running}`).receive({ topic: 'unwatch', payload: '*' });
      running = null;
      await new Promise((r) => setTimeout(r, 500)); // polls in flight end, the fleet's list is emptied
      return {};
    case 'exit':
      await red?.stop();
      setImmediate(() => process.exit(0));
      return {};
  }
}

if (require.main === module) serve(handle);

// ------------------------------------------------------------------ the parent side

type Proc = ChildCalls<FleetCommand>;

/** Redis's own counters: calls per command (INFO itself left out) and its CPU in ms. */
async function redisStats(admin: Redis): Promise<{ calls: Record<string, number>; cpuMs: number }> {
  const text = await admin.info('all');
  const calls: Record<string, number> = {};
  for (const m of text.matchAll(/^cmdstat_([a-z|_-]+):calls=(\d+)/gm)) if (m[1] !== 'info') calls[m[1]] = Number(m[2]);
  const num = (k: string) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0);
  return { calls, cpuMs: (num('used_cpu_user') + num('used_cpu_sys')) * 1000 };
}
const callsBetween = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - (a[k] ?? 0)]).filter(([, v]) => (v as number) > 0)) as Record<string, number>;
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

const ROLES = [
  { role: 'off', kind: 'off', prefix: 'O' },
  { role: 'offB', kind: 'off', prefix: 'P' },
  { role: 'on', kind: 'on', prefix: 'R' },
] as const;
type Role = (typeof ROLES)[number]['role'];

/** Process i runs role (i + s·w) mod 3 in window w, s = 1 in the first rotation and 2 in the second: each role in each process once per rotation, after another role each time. */
const seatOf = (i: number, w: number) => ROLES[(i + (1 + (Math.floor(w / ROLES.length) % 2)) * w) % ROLES.length];

interface WindowResult {
  cpuMs: number[];
  emitted: number[];
  polls: Record<string, number>;
  redisCalls: Record<string, number>;
  redisCpuMs: number;
}

async function watchSideBySide(ctx: BenchContext, redis: RedisServer, admin: Redis): Promise<string> {
  const procs = await Promise.all(
    ROLES.map(async (_, i) => {
      const p = new ChildCalls<FleetCommand>(fork(path.join(__dirname, 'fleet.js'), { execArgv: ['--expose-gc'] }));
      await p.call({ cmd: 'init', base: ctx.server.base, redisUrl: redis.url, fleetKey: `bench-fleet-p${i}` });
      return p;
    }),
  );
  const all = (m: FleetCommand) => Promise.all(procs.map((p) => p.call(m)));
  const startAll = (n: number, w: number) => Promise.all(procs.map((p, i) => p.call({ cmd: 'start', kind: seatOf(i, w).kind, n, prefix: seatOf(i, w).prefix })));
  const window = async (ms: number): Promise<WindowResult> => {
    const [g0, r0] = [await ctx.server.getsBy(), await redisStats(admin)];
    await all({ cmd: 'begin' });
    await new Promise((r) => setTimeout(r, ms));
    const ends = await all({ cmd: 'end' });
    const [g1, r1] = [await ctx.server.getsBy(), await redisStats(admin)];
    return {
      cpuMs: ends.map((e) => e.cpuMs),
      emitted: ends.map((e) => e.emitted),
      polls: Object.fromEntries(ROLES.map((c) => [c.prefix, (g1[c.prefix] ?? 0) - (g0[c.prefix] ?? 0)])),
      redisCalls: callsBetween(r0.calls, r1.calls),
      redisCpuMs: r1.cpuMs - r0.cpuMs,
    };
  };
  try {
    // Idle: each process's CPU per second with nothing watched (Node-RED's timers, each configuration's fleet heartbeat), and Redis's commands and CPU then.
    await new Promise((r) => setTimeout(r, 3000));
    const idleWindows: WindowResult[] = [];
    for (let q = 0; q < 4; q++) idleWindows.push(await window(QUICK ? 1000 : 2500));
    const idleMs = QUICK ? 1000 : 2500;
    const idleCpuPerSec = procs.map((_, i) => median(idleWindows.map((w) => w.cpuMs[i])) / (idleMs / 1000));
    // Per command, as a mean: a heartbeat every 2 s falls into some quarters and not others.
    const idleCallsPerSec: Record<string, number> = {};
    for (const w of idleWindows) for (const [k, v] of Object.entries(w.redisCalls)) idleCallsPerSec[k] = (idleCallsPerSec[k] ?? 0) + v / ((idleWindows.length * idleMs) / 1000);
    const idleRedisCpuPerSec = median(idleWindows.map((w) => w.redisCpuMs)) / (idleMs / 1000);
    // Warm-up: every process runs every role's code for a while at 1 000 tokens, so that each has it compiled.
    for (let w = 0; w < ROLES.length; w++) {
      await startAll(1000, w);
      await new Promise((r) => setTimeout(r, QUICK ? 3000 : 6000));
      await all({ cmd: 'stop' });
    }
    const rows: string[] = [];
    for (const n of QUICK ? [100] : [100, 1000]) {
      rows.push(await watchSize(ctx, n, { procs, all, startAll, window, idleCpuPerSec, idleCallsPerSec, idleRedisCpuPerSec }));
      console.log(rows.at(-1));
    }
    return [
      `#### Watching N sessions at a ${INTERVAL_SEC} s interval, coordination off vs on (one replica: it owns every token)`,
      '',
      `Three processes, each a real Node-RED with the same flow (bench/fleet.ts): a watch node on a configuration without coordination and one on a configuration with *Coordinate replicas* set to this section's redis-server (fleet cycle 2 s and lease 6 s, the defaults; each process its own fleet key, so each is the only replica of its fleet). In every window one process runs \`off\`, one \`offB\` (the same as off: the A/A, the method's own noise) and one \`on\`, each polling N tokens of its own (counted apart at the bench server), all started together and polling for ${SETTLE_MS / 1000} s before the window (every token polled once, the leases taken), every window opened and closed for all three at once; in every window each role sits in another process (a whole rotation = 3 windows). The meter moves on every query, so every poll is a change: \`on\` commits every poll's state to Redis before it emits (the worst case). CPU per poll: the process's CPU (process.cpuUsage) over the window less its own idle CPU (${idleCpuPerSec.map((x) => x.toFixed(1)).join(' / ')} ms/s, nothing watched), over the polls the server counted. Ratios per window (the same seconds of this machine), median [min–max] over the windows; "in all" pools every window (every role in every seat alike). Redis commands per poll: INFO commandstats over the window (INFO left out) less the idle rate of each command (${sum(idleCallsPerSec).toFixed(1)} commands/s in all: the three idle configurations' heartbeats), over \`on\`'s polls; Redis counts the commands a script runs as well as the script (EVALSHA), so "scripts per poll" counts the scripts sent (one round trip each), "commands per poll" what Redis executed; Redis's CPU likewise (idle ${idleRedisCpuPerSec.toFixed(2)} ms/s). Requests per poll at the service: GETs counted at the server over N × window / interval, and token requests in the windows; events per poll: messages reaching the sink over the server's GETs.`,
      '',
      '| sessions | windows × s | off µs/poll | offB µs/poll | on µs/poll | on/off (per window) | on/(off, offB) in all | A/A offB/off | on − (off, offB) µs/poll | Redis scripts (EVALSHA) per poll, on | Redis commands per poll, on | by command, per poll | Redis CPU µs/poll | service GETs per token-interval off / on | token requests in windows | events per GET off / on |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    await Promise.all(procs.map((p) => p.exit()));
  }
}

interface SizeTools {
  procs: Proc[];
  all(m: FleetCommand): Promise<Record<string, number>[]>;
  startAll(n: number, w: number): Promise<unknown>;
  window(ms: number): Promise<WindowResult>;
  idleCpuPerSec: number[];
  idleCallsPerSec: Record<string, number>;
  idleRedisCpuPerSec: number;
}

async function watchSize(ctx: BenchContext, n: number, t: SizeTools): Promise<string> {
  const windows = QUICK ? ROLES.length : n <= 100 ? 2 * ROLES.length : ROLES.length;
  const windowMs = QUICK ? 5000 : n <= 100 ? 15_000 : 10_000;
  const cpu: Record<Role, number[]> = { off: [], offB: [], on: [] };
  const polls: Record<Role, number[]> = { off: [], offB: [], on: [] };
  const events: Record<Role, number[]> = { off: [], offB: [], on: [] };
  const redisCalls: Record<string, number> = {};
  let redisCpuMs = 0;
  let tokensInWindows = 0;
  for (let w = 0; w < windows; w++) {
    if (w > 0) await t.all({ cmd: 'stop' });
    await t.startAll(n, w);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const tok0 = (await ctx.server.counts()).token;
    const got = await t.window(windowMs);
    tokensInWindows += (await ctx.server.counts()).token - tok0;
    t.procs.forEach((_, i) => {
      const c = seatOf(i, w);
      cpu[c.role].push(got.cpuMs[i] - (t.idleCpuPerSec[i] * windowMs) / 1000);
      polls[c.role].push(got.polls[c.prefix]);
      events[c.role].push(got.emitted[i]);
    });
    for (const [k, v] of Object.entries(got.redisCalls)) redisCalls[k] = (redisCalls[k] ?? 0) + v;
    redisCpuMs += got.redisCpuMs;
    console.log(`fleet watch ${n} window ${w + 1}: ${ROLES.map((c) => `${c.role} ${((cpu[c.role][w] * 1000) / Math.max(1, polls[c.role][w])).toFixed(0)} µs/poll (${polls[c.role][w]} polls, ${events[c.role][w]} events)`).join(', ')}; Redis ${sum(got.redisCalls)} commands`);
  }
  await t.all({ cmd: 'stop' });
  const per = (r: Role, w: number) => (cpu[r][w] * 1000) / Math.max(1, polls[r][w]);
  const inAll = (r: Role) => (cpu[r].reduce((a, b) => a + b, 0) * 1000) / Math.max(1, polls[r].reduce((a, b) => a + b, 0));
  const idx = Array.from({ length: windows }, (_, w) => w);
  const onOff = idx.map((w) => per('on', w) / per('off', w));
  const aa = idx.map((w) => per('offB', w) / per('off', w));
  const total = (r: Role) => polls[r].reduce((a, b) => a + b, 0);
  const seconds = (windows * windowMs) / 1000;
  /** each command's calls per poll of on, the idle rate subtracted */
  const perPoll = Object.fromEntries(Object.entries(redisCalls).map(([k, v]) => [k, (v - (t.idleCallsPerSec[k] ?? 0) * seconds) / total('on')]));
  const byCommand = Object.entries(perPoll)
    .filter(([, v]) => v >= 0.0005)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(3)}`)
    .join(', ');
  const scriptsPerPoll = (perPoll.evalsha ?? 0) + (perPoll.eval ?? 0);
  const redisCpuUs = ((redisCpuMs - t.idleRedisCpuPerSec * seconds) * 1000) / total('on');
  const expected = (n * seconds) / INTERVAL_SEC;
  const evPerGet = (r: Role) => (events[r].reduce((a, b) => a + b, 0) / Math.max(1, total(r))).toFixed(3);
  const offPool = ((cpu.off.reduce((a, b) => a + b, 0) + cpu.offB.reduce((a, b) => a + b, 0)) * 1000) / (total('off') + total('offB'));
  return `| ${n} | ${windows} × ${windowMs / 1000} | ${inAll('off').toFixed(0)} | ${inAll('offB').toFixed(0)} | ${inAll('on').toFixed(0)} | **${spread(onOff)}** | ${(inAll('on') / offPool).toFixed(2)} | ${spread(aa)} | ${(inAll('on') - offPool).toFixed(0)} | ${scriptsPerPoll.toFixed(2)} | ${sum(perPoll).toFixed(2)} | ${byCommand} | ${redisCpuUs.toFixed(0)} | ${((total('off') + total('offB')) / 2 / expected).toFixed(3)} / ${(total('on') / expected).toFixed(3)} | ${tokensInWindows} | ${evPerGet('off')} / ${evPerGet('on')} |`;
}

// ------------------------------------------------------------------ part 2: progress queries in this process

const QUERY_CONTENDERS = [
  { id: 'q-off', label: 'off, no limit' },
  { id: 'q-on', label: 'on, no limit' },
  { id: 'q-off-rps', label: 'off, 10 000/s' },
  { id: 'q-on-rps', label: 'on, 10 000/s' },
] as const;
type QueryId = (typeof QUERY_CONTENDERS)[number]['id'];

function queryFlow(base: string, redisUrl: string): FlowNode[] {
  const progress = (id: string) => ({ id, type: 'charging-progress', z: 'tab', service: `svc-${id}`, wires: [['sink']] });
  return [
    { id: 'tab', type: 'tab', label: 'fleet queries' },
    svc(base, 'svc-q-off'),
    svc(base, 'svc-q-on', { fleetKey: 'bench-q-on' }, { coordination: redisUrl }),
    svc(base, 'svc-q-off-rps', { maxRequestsPerSec: 10_000 }),
    svc(base, 'svc-q-on-rps', { maxRequestsPerSec: 10_000, fleetKey: 'bench-q-on-rps' }, { coordination: redisUrl }),
    ...QUERY_CONTENDERS.map((c) => progress(c.id)),
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ];
}

async function queries(ctx: BenchContext, redis: RedisServer, admin: Redis): Promise<string> {
  await ctx.red.deploy(queryFlow(ctx.server.base, redis.url));
  const conc = 10;
  const total = QUICK ? 500 : 2000;
  const rounds = QUICK ? 2 : 7;
  const drives = new Map<QueryId, Drive>(QUERY_CONTENDERS.map((c) => [c.id, ctx.throughNode(c.id)]));
  for (const c of QUERY_CONTENDERS) await closedLoop(Math.max(200, total / 4), conc, drives.get(c.id)!); // warm-up: code compiled, tokens fetched
  const samples = new Map<QueryId, Sample[]>(QUERY_CONTENDERS.map((c) => [c.id, []]));
  const calls = new Map<QueryId, number[]>(QUERY_CONTENDERS.map((c) => [c.id, []]));
  const scripts = new Map<QueryId, number[]>(QUERY_CONTENDERS.map((c) => [c.id, []]));
  const redisCpu = new Map<QueryId, number[]>(QUERY_CONTENDERS.map((c) => [c.id, []]));
  const gets = new Map<QueryId, number[]>(QUERY_CONTENDERS.map((c) => [c.id, []]));
  const tokens0 = (await ctx.server.counts()).token;
  for (let r = 0; r < rounds; r++) {
    const k = r % QUERY_CONTENDERS.length;
    for (const c of [...QUERY_CONTENDERS.slice(k), ...QUERY_CONTENDERS.slice(0, k)]) {
      const [r0, g0] = [await redisStats(admin), (await ctx.server.counts()).get];
      samples.get(c.id)!.push(await closedLoop(total, conc, drives.get(c.id)!));
      const [r1, g1] = [await redisStats(admin), (await ctx.server.counts()).get];
      const between = callsBetween(r0.calls, r1.calls);
      calls.get(c.id)!.push(sum(between) / total);
      scripts.get(c.id)!.push(((between.evalsha ?? 0) + (between.eval ?? 0)) / total);
      redisCpu.get(c.id)!.push(((r1.cpuMs - r0.cpuMs) * 1000) / total);
      gets.get(c.id)!.push((g1 - g0) / total);
    }
  }
  const tokenRequests = (await ctx.server.counts()).token - tokens0;
  // The configurations close (their fleets given back) while Redis still answers.
  await ctx.red.deploy([{ id: 'tab', type: 'tab', label: 'fleet done' }]);
  const s = (id: QueryId) => samples.get(id)!;
  const ratio = (a: QueryId, b: QueryId) => s(a).map((x, i) => x.cpuUs / s(b)[i].cpuUs);
  const diff = (a: QueryId, b: QueryId) => s(a).map((x, i) => x.cpuUs - s(b)[i].cpuUs);
  const p50diff = (a: QueryId, b: QueryId) => s(a).map((x, i) => (x.p50 - s(b)[i].p50) * 1000);
  const rows = QUERY_CONTENDERS.map(
    (c) =>
      `| ${c.label} | ${median(s(c.id).map((x) => x.cpuUs)).toFixed(0)} | ${median(s(c.id).map((x) => x.rps)).toFixed(0)} | ${median(s(c.id).map((x) => x.p50)).toFixed(2)} / ${median(s(c.id).map((x) => x.p99)).toFixed(2)} | ${median(scripts.get(c.id)!).toFixed(2)} | ${median(calls.get(c.id)!).toFixed(2)} | ${median(redisCpu.get(c.id)!).toFixed(0)} | ${median(gets.get(c.id)!).toFixed(3)} |`,
  );
  return [
    `#### Progress queries, coordination off vs on, concurrency ${conc}, in this process`,
    '',
    `A charging-progress node driven with msg input (as section 1, bench/query-bench.ts: ${total} messages per run, ${rounds} rounds, the four contenders in an order rotated every round, each warmed up first), each on a configuration of its own: without and with *Coordinate replicas* (a fleet key each), without Max requests per second and with 10 000/s (high enough never to wait at ~3 000 queries/s: what is measured is the fleet budget's Redis round trip per request, not a limit). CPU is this process's (the runtime, ioredis included) per message; Redis's own CPU beside it. Ratios and differences within a round, median [min–max]. Token requests during the rounds: ${tokenRequests}.`,
    '',
    '| contender | CPU µs/msg | req/s | p50 / p99 ms | Redis scripts (EVALSHA) per query | Redis commands per query | Redis CPU µs/query | service GETs per query |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    '| | CPU on/off | CPU on − off, µs/msg | p50 on − off, µs |',
    '|---|---|---|---|',
    `| no Max requests per second | **${spread(ratio('q-on', 'q-off'))}** | ${spread(diff('q-on', 'q-off'), 0)} | ${spread(p50diff('q-on', 'q-off'), 0)} |`,
    `| Max requests per second 10 000 (fleet budget) | **${spread(ratio('q-on-rps', 'q-off-rps'))}** | ${spread(diff('q-on-rps', 'q-off-rps'), 0)} | ${spread(p50diff('q-on-rps', 'q-off-rps'), 0)} |`,
    `| with the limit over without it, coordination off (the local budget alone) | ${spread(ratio('q-off-rps', 'q-off'))} | ${spread(diff('q-off-rps', 'q-off'), 0)} | ${spread(p50diff('q-off-rps', 'q-off'), 0)} |`,
  ].join('\n');
}

/** The section: its own redis-server (no persistence, loopback), part 1 in three processes, part 2 in this one. */
export async function fleetSection(ctx: BenchContext): Promise<string> {
  const head = '### 7. Coordinate replicas: coordination off vs on, side by side (issue 35)';
  if (!REDIS_SERVER) return `${head}\n\nSkipped: redis-server is not installed (apt-get install redis-server).`;
  const redis = await RedisServer.start({ persist: false });
  const admin = redis.admin();
  try {
    const started = Date.now();
    const version = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? '?';
    const watch = await watchSideBySide(ctx, redis, admin);
    const query = await queries(ctx, redis, admin);
    return [head, '', `Debian redis-server ${version} started by the section on 127.0.0.1, no persistence. Took ${Math.round((Date.now() - started) / 1000)} s.`, '', watch, '', query].join('\n');
  } finally {
    await redis.close();
  }
}
