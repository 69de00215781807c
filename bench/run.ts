/**
 * `npm run bench`: side-by-side measurements in one run. Not part of npm test.
 * Loopback only; the service runs in its own process (bench/server.ts), Node-RED
 * in this one (bench/runtime.ts), so CPU per message is the runtime's.
 *
 *   npm run bench -- --quick     fewer rounds and messages (a smoke run; results not written)
 *   npm run bench -- --watch     only the watch-mode sections (written to a -watch results file)
 *   npm run bench -- --throughput   only section 1 (printed only); BENCH_CONCURRENCY=1,10 narrows it
 *   npm run bench -- --fleet     only section 7, coordination off vs on (bench/fleet.ts; written to a -fleet results file)
 *
 * Contenders run interleaved, in an order rotated every round, each warmed up
 * before it is measured; ratios are computed within a round and reported as
 * median [min–max] over the rounds.
 */
import { fork, ChildProcess, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import axios from 'axios';
import { DEFAULT_MAX_IN_FLIGHT } from '../nodes/lib/client/service-client';
import { EmbeddedNodeRed, FlowNode, watchFlow } from './runtime';
import { a0Client, Drive } from './floor';
import { CONTENDER_KINDS, type ContenderCommand, type ContenderKind } from './contender';
import { ChildCalls } from './ipc';
import { fleetSection } from './fleet';

const QUICK = process.argv.includes('--quick');
/** only the watch-mode sections (adding tokens, polling side by side with bare axios) */
const WATCH_ONLY = process.argv.includes('--watch');
/** only the progress-query throughput section (printed only: to compare two builds run one after the other) */
const THROUGHPUT_ONLY = process.argv.includes('--throughput');
/** only the coordination section (bench/fleet.ts) */
const FLEET_ONLY = process.argv.includes('--fleet');
const CONCURRENCY = process.env.BENCH_CONCURRENCY ? process.env.BENCH_CONCURRENCY.split(',').map(Number) : [1, 10, 100];
const ROUNDS = QUICK ? 2 : 7;
const MESSAGES: Record<number, number> = QUICK ? { 1: 300, 10: 800, 100: 800 } : { 1: 1500, 10: 4000, 100: 4000 };
/** BENCH_WATCH_SIZES=100,1000, BENCH_WATCH_WINDOWS=8, BENCH_WATCH_WARMUP_MS, BENCH_WATCH_WARMUP_TOKENS and BENCH_WATCH_SETTLE_MS narrow or widen the watch sections while working on them (printed only: never to the results files) */
const WATCH_SIZES = process.env.BENCH_WATCH_SIZES ? process.env.BENCH_WATCH_SIZES.split(',').map(Number) : QUICK ? [100, 1000] : [100, 1000, 10_000];
/**
 * seconds per measured window: localfilesystem's default flushInterval (30 s; the bench sets none), at every
 * size, so that each window holds one flush of the whole flow scope, as every
 * 30 s of a real install does. localfilesystem arms its flush timer at the
 * first write after a flush, here the watch command's write of the token list,
 * so the flush falls 30 s after a contender starts: inside the window that
 * follows the 20 s settle. Before, a 20 s window at 1 000 tokens always held
 * one (a flush per 20 s, counted 1.5 times), and a 10 s window at 10 000 ended
 * at that very moment, holding its flush or not by milliseconds.
 * At 100 tokens 30 s holds 300 polls per window (20 windows, 6 000 in all).
 */
const WATCH_SECONDS = QUICK ? 6 : 30;
/**
 * side-by-side windows per size: whole rotations of the five contenders over the
 * five processes, four at 100 tokens and two above. At 100 tokens a poll costs
 * the most CPU and the least in all, and two rotations did not settle a ratio:
 * the same minimal node read 1.13, 1.06 and 0.97 of bare in three runs of the
 * same code (2026-11-24). With four, each contender also follows every other one
 * in its process once (see seatOf).
 */
const watchWindows = (n: number) => Number(process.env.BENCH_WATCH_WINDOWS) || (QUICK ? 2 : n <= 100 ? 20 : 10);
const ADD_SIZES = QUICK ? [1000, 10_000] : [1000, 10_000, 100_000];
const WATCH_INTERVAL_MS = 10_000;
/**
 * How long the contenders poll before the first size's windows: an install
 * watches for months, and its code is compiled by then. After `watch`, CPU per
 * poll kept falling for minutes at 100 tokens (bench/watch-profile.ts
 * WATCH_CONSEC, 2026-11-24: ours 1 064, 957, 871, 842, 885, 701 µs/poll in six
 * 40 s windows, bare 726 ... 599), ours, with more code to compile, for longer.
 * Split over the contenders, so that every process has compiled every one;
 * in the run at eb05e89 the first rotation still ran higher than the second.
 */
const WATCH_WARMUP_MS = Number(process.env.BENCH_WATCH_WARMUP_MS) || (QUICK ? 20_000 : 150_000);
/**
 * Tokens each contender polls during the warm-up (at least the first size's):
 * what compiles code is calls, and at 100 tokens the warm-up held 300 polls per
 * contender per process, after which V8 was still optimising our functions
 * (node --trace-opt, 2026-11-24: 'completed optimizing' lines in the fourth
 * 20 s window of one watch, ours 678, 504, 488, 395 µs/poll in four windows in a
 * row). At 2 000 tokens it holds 6 000: what an install at 100 tokens has
 * polled ten minutes after a deploy.
 */
const WATCH_WARMUP_TOKENS = Number(process.env.BENCH_WATCH_WARMUP_TOKENS) || 2_000;
/**
 * How long contenders poll after each window's start, before the window: every
 * token polled twice, its first-poll event sent and its heap grown. All four
 * start together, so what settling remains falls on all of them; what is ours
 * alone (the first poll's 'started' event, the watch list) counts against us.
 */
const WATCH_SETTLE_MS = Number(process.env.BENCH_WATCH_SETTLE_MS) || (QUICK ? 10_000 : 2 * WATCH_INTERVAL_MS);

// ------------------------------------------------------------------ the service (another process)
let server: ChildProcess;
let base = '';
function ask<T>(cmd: string, key: string, extra: Record<string, unknown> = {}): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>) => {
      if (key in m) {
        server.off('message', on);
        resolve(m[key] as T);
      }
    };
    server.on('message', on);
    server.send({ cmd, ...extra });
  });
}
type Counts = { token: number; get: number; post: number; firstGetAt: number };
const counts = () => ask<Counts>('counts', 'counts');
const resetCounts = () => ask<boolean>('reset', 'reset');
const setLatency = (ms: number) => ask<number>('latency', 'latency', { ms });

// ------------------------------------------------------------------ measuring
interface Sample {
  rps: number;
  p50: number;
  p99: number;
  /** CPU of this process (the runtime) per message, µs */
  cpuUs: number;
}
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
const spread = (xs: number[], d = 2) => `${median(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}]`;

/** Keeps `conc` messages outstanding until `total` are answered. */
async function closedLoop(total: number, conc: number, one: (i: number) => Promise<void>): Promise<Sample> {
  global.gc?.();
  const lat: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < total) {
        const i = next++;
        const s = performance.now();
        await one(i);
        lat.push(performance.now() - s);
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return { rps: (total / ms) * 1000, p50: pct(lat, 50), p99: pct(lat, 99), cpuUs: (cpu.user + cpu.system) / total };
}

// ------------------------------------------------------------------ contenders
let red: EmbeddedNodeRed;
const waiting = new Map<number, () => void>();
let seq = 0;

/** Sends a message into a node of the deployed flow; resolves when it reaches the flow's sink. */
function throughNode(id: string, token = (i: number) => `T${i}`): Drive {
  const node = red.node(id);
  return (i) =>
    new Promise<void>((resolve) => {
      const n = ++seq;
      waiting.set(n, resolve);
      node.receive({ _bench: n, payload: { token: token(i) } });
    });
}


/** axios with its defaults and a keep-alive agent (follow-redirects, JSON parsing, params): what many users write. Not the floor. */
function axiosDefaults(): { drive: Drive; close(): void } {
  const httpAgent = new http.Agent({ keepAlive: true });
  const ax = axios.create({ httpAgent, proxy: false });
  const headers = { Authorization: 'Bearer bench-token-value', Accept: 'application/json' };
  return {
    drive: async (i) => {
      await ax.get(`${base}/poi/v1/charging-sessions`, { params: { token: `T${i}` }, headers });
    },
    close: () => httpAgent.destroy(),
  };
}

const FN_ADD_TOKEN = "msg.url = global.get('benchUrl') + '?token=' + encodeURIComponent(msg.payload.token);\nmsg.headers = { Authorization: 'Bearer ' + global.get('benchToken'), Accept: 'application/json' };\nreturn msg;";

/** Every contender of the throughput section in one flow, so that one deploy serves a concurrency level. */
function throughputFlow(conc: number): FlowNode[] {
  const svc = (id: string, extra: Record<string, unknown> = {}) => ({ id, type: 'charging-service', name: `bench ${id.slice(4)}`, baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' }, ...extra });
  const httpReq = (id: string, persist: boolean) => ({ id, type: 'http request', z: 'tab', method: 'GET', ret: 'obj', paytoqs: 'ignore', url: '', persist, tls: '', proxy: '', insecureHTTPParser: false, authType: '', senderr: false, headers: [], wires: [['sink']] });
  return [
    { id: 'tab', type: 'tab', label: 'bench' },
    svc('svc-default'),
    svc('svc-raised', { maxInFlight: Math.max(conc, DEFAULT_MAX_IN_FLIGHT) }),
    { id: 'n', type: 'bench-minimal', z: 'tab', wires: [['sink']] },
    { id: 'b', type: 'charging-progress', z: 'tab', service: 'svc-default', wires: [['sink']] },
    { id: 'b-raised', type: 'charging-progress', z: 'tab', service: 'svc-raised', wires: [['sink']] },
    { id: 'c', type: 'function', z: 'tab', func: FN_ADD_TOKEN, outputs: 1, libs: [], wires: [['c-req']] },
    httpReq('c-req', true),
    { id: 'c-nokeep', type: 'function', z: 'tab', func: FN_ADD_TOKEN, outputs: 1, libs: [], wires: [['c-nokeep-req']] },
    httpReq('c-nokeep-req', false),
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ];
}

async function throughput(): Promise<string> {
  const rows: string[] = [];
  const ratioRows: string[] = [];
  for (const conc of CONCURRENCY) {
    await red.deploy(throughputFlow(conc));
    const a0 = a0Client(base, DEFAULT_MAX_IN_FLIGHT);
    const inNode = a0Client(base, DEFAULT_MAX_IN_FLIGHT);
    (global as unknown as { __benchA0: (t: string) => Promise<unknown> }).__benchA0 = inNode.query;
    const ad = axiosDefaults();
    const contenders: Array<[string, Drive]> = [
      ['(a0) axios as configured', a0.drive],
      ['(n) the a0 call in a minimal node', throughNode('n')],
      ['(a) axios defaults', ad.drive],
      ['(b) our node, defaults', throughNode('b')],
      [`(b+) our node, Max in flight ${Math.max(conc, DEFAULT_MAX_IN_FLIGHT)}`, throughNode('b-raised')],
      ['(c) http request + function, keep-alive', throughNode('c')],
      ['(c-) http request + function, no keep-alive', throughNode('c-nokeep')],
    ];
    const samples = new Map<string, Sample[]>(contenders.map(([n]) => [n, []]));
    const total = MESSAGES[conc];
    for (const [, drive] of contenders) await closedLoop(Math.max(100, total / 5), conc, drive); // warm-up, each
    const ratios = { cpuA0: [] as number[], rpsA0: [] as number[], cpuN: [] as number[], nA0: [] as number[], cpuC: [] as number[], rpsC: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      const order = contenders.slice(r % contenders.length).concat(contenders.slice(0, r % contenders.length));
      const round = new Map<string, Sample>();
      for (const [name, drive] of order) round.set(name, await closedLoop(total, conc, drive));
      for (const [name, s] of round) samples.get(name)?.push(s);
      const b = round.get('(b) our node, defaults') as Sample;
      const a = round.get('(a0) axios as configured') as Sample;
      const c = round.get('(c) http request + function, keep-alive') as Sample;
      const n = round.get('(n) the a0 call in a minimal node') as Sample;
      ratios.cpuN.push(b.cpuUs / n.cpuUs);
      ratios.nA0.push(n.cpuUs / a.cpuUs);
      ratios.cpuA0.push(b.cpuUs / a.cpuUs);
      ratios.rpsA0.push(b.rps / a.rps);
      ratios.cpuC.push(c.cpuUs / b.cpuUs);
      ratios.rpsC.push(b.rps / c.rps);
    }
    a0.close();
    inNode.close();
    ad.close();
    for (const [name, xs] of samples) {
      rows.push(`| ${conc} | ${name} | ${median(xs.map((x) => x.rps)).toFixed(0)} | ${median(xs.map((x) => x.cpuUs)).toFixed(0)} | ${median(xs.map((x) => x.p50)).toFixed(2)} / ${median(xs.map((x) => x.p99)).toFixed(2)} |`);
    }
    ratioRows.push(`| ${conc} | ${spread(ratios.cpuA0)} | ${spread(ratios.nA0)} | ${spread(ratios.cpuN)} | ${spread(ratios.rpsA0)} | ${spread(ratios.cpuC)} | ${spread(ratios.rpsC)} |`);
    console.log(ratioRows.at(-1));
  }
  return [
    `### 1. Progress query: throughput, CPU per message, latency (${ROUNDS} rounds)`,
    '',
    `Messages per run: ${MESSAGES[1]} / ${MESSAGES[10]} / ${MESSAGES[100]} at concurrency 1 / 10 / 100. (a0) is the floor: axios built with the client's own axiosOptions() and keep-alive agents (maxSockets ${DEFAULT_MAX_IN_FLIGHT}), a prebuilt URL, and JSON.parse of the body. (b) is charging-progress at the defaults users get (Max in flight ${DEFAULT_MAX_IN_FLIGHT}); (n) is the same a0 call made inside a minimal custom node that sends the parsed record on: the floor for any Node-RED node, so (n)/(a0) is what Node-RED itself costs. (c) is core http request (return parsed JSON) + a function node setting the Bearer header from a token fetched beforehand (no renewal). (b) and (c) include Node-RED delivering the result to the next node.`,
    '',
    '| concurrency | contender | req/s | CPU µs/msg | p50 / p99 ms |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    'Ratios within each round, median [min–max]:',
    '',
    '| concurrency | CPU per msg (b)/(a0) | CPU (n)/(a0): Node-RED\'s own share | CPU (b)/(n): ours over the minimal node | req/s (b)/(a0) | CPU per msg (c)/(b) | req/s (b)/(c) |',
    '|---|---|---|---|---|---|---|',
    ...ratioRows,
  ].join('\n');
}

/** 10 000 messages at concurrency 10 with an editor tab connected: status updates queued for it, heap growth. */
async function statusWithEditor(): Promise<string> {
  await red.deploy(throughputFlow(10));
  const editor = await red.editor();
  const total = QUICK ? 2_000 : 10_000;
  const rows: string[] = [];
  const contenders: Array<[string, Drive]> = [
    ['(b) our node', throughNode('b')],
    ['(c) http request + function', throughNode('c')],
  ];
  for (let r = 0; r < (QUICK ? 1 : 3); r++) {
    for (const [name, drive] of r % 2 ? [...contenders].reverse() : contenders) {
      await new Promise((res) => setTimeout(res, 500)); // quiet
      global.gc?.();
      const heap0 = process.memoryUsage().heapUsed;
      const seen0 = editor.statusUpdates();
      const s = await closedLoop(total, 10, drive);
      global.gc?.();
      const heapGrowth = (process.memoryUsage().heapUsed - heap0) / 1048576;
      const duringLoad = editor.statusUpdates() - seen0;
      // The backlog: what is still queued for the editor when the load stops, delivered at most 50 per 50 ms.
      let last = -1;
      const drainStart = performance.now();
      while (editor.statusUpdates() !== last && performance.now() - drainStart < 60_000) {
        last = editor.statusUpdates();
        await new Promise((res) => setTimeout(res, 300));
      }
      const backlog = editor.statusUpdates() - seen0 - duringLoad;
      rows.push(`| ${name} | ${s.rps.toFixed(0)} | ${duringLoad + backlog} | ${backlog} | ${heapGrowth.toFixed(2)} |`);
      console.log(rows.at(-1));
    }
  }
  editor.close();
  return [
    `### 2. Status updates with an editor connected: ${total} messages at concurrency 10`,
    '',
    'A websocket client on /comms subscribed to status/# stands for an open editor tab. Node-RED queues every status update per connection and sends at most 50 per 50 ms; "queued at the end" is what was still on its way when the last message was answered. Heap growth is after GC, from before the run to its end.',
    '',
    '| contender | req/s | status updates sent to the editor | queued at the end of the load | heap growth MiB |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/** Throughput by Max in flight against a service that takes 20 ms, as a real one does. */
async function maxInFlight(): Promise<string> {
  await setLatency(20);
  const limits = [4, 8, 16, 32, 64];
  const flow: FlowNode[] = [{ id: 'tab', type: 'tab', label: 'limits' }, { id: 'sink', type: 'bench-sink', z: 'tab' }];
  for (const m of limits) {
    flow.push({ id: `svc-${m}`, type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, maxInFlight: m, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } });
    flow.push({ id: `p-${m}`, type: 'charging-progress', z: 'tab', service: `svc-${m}`, wires: [['sink']] });
  }
  await red.deploy(flow);
  const rows: string[] = [];
  for (const conc of [10, 100]) {
    const rps = new Map<number, number[]>(limits.map((m) => [m, []]));
    for (const m of limits) await closedLoop(50, conc, throughNode(`p-${m}`));
    for (let r = 0; r < (QUICK ? 1 : 3); r++) {
      for (const m of r % 2 ? [...limits].reverse() : limits) rps.get(m)?.push((await closedLoop(QUICK ? 300 : 1000, conc, throughNode(`p-${m}`))).rps);
    }
    rows.push(`| ${conc} | ${limits.map((m) => median(rps.get(m) as number[]).toFixed(0)).join(' | ')} |`);
    console.log(rows.at(-1));
  }
  await setLatency(0);
  return [
    '### 3. Max in flight: progress queries per second against a service answering in 20 ms',
    '',
    `| concurrency | ${limits.map((m) => `Max in flight ${m}`).join(' | ')} |`,
    `|---|${limits.map(() => '---').join('|')}|`,
    ...rows,
  ].join('\n');
}

async function singleFlight(): Promise<string> {
  const tokenCounts: number[] = [];
  const firsts: number[] = [];
  for (let r = 0; r < (QUICK ? 1 : 3); r++) {
    const flow: FlowNode[] = [
      { id: 'tab', type: 'tab', label: 'flight' },
      { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
      { id: 'sink', type: 'bench-sink', z: 'tab' },
    ];
    for (let i = 0; i < 20; i++) flow.push({ id: `p${i}`, type: 'charging-progress', z: 'tab', service: 'svc', wires: [['sink']] });
    await red.deploy(flow);
    await resetCounts();
    const t0 = performance.now();
    let first = 0;
    const drives = Array.from({ length: 20 }, (_, i) => throughNode(`p${i}`));
    await Promise.all(Array.from({ length: 1000 }, (_, i) => drives[i % 20](i).then(() => (first ||= performance.now() - t0))));
    firsts.push(first);
    tokenCounts.push((await counts()).token);
  }
  return [
    '### 4. Token single flight: 1000 messages at once across 20 nodes sharing one configuration',
    '',
    '| token requests (each round) | first answer after (ms, median; the token endpoint takes 20 ms) |',
    '|---|---|',
    `| ${tokenCounts.join(', ')} | ${median(firsts).toFixed(1)} |`,
  ].join('\n');
}


/** A contender process (bench/contender.ts), initialised. */
async function spawnContender(intervalSec: number): Promise<ChildCalls<ContenderCommand>> {
  const c = new ChildCalls<ContenderCommand>(fork(path.join(__dirname, 'contender.js'), { execArgv: ['--expose-gc'] }));
  await c.call({ cmd: 'init', base, intervalSec });
  return c;
}

/**
 * The side-by-side contenders: our watch node with each store, bare axios, bare axios again (the A/A check of
 * the method itself), and bare axios whose every record leaves a minimal node as one Node-RED message (what
 * Node-RED's own message passing costs any node that emits an event per poll; shown beside, not the floor).
 */
const SIDE_BY_SIDE = [
  { role: 'mem', kind: 'mem', prefix: 'M' },
  { role: 'file', kind: 'file', prefix: 'F' },
  { role: 'bare', kind: 'bare', prefix: 'B' },
  { role: 'bareB', kind: 'bare', prefix: 'C' },
  { role: 'nodered', kind: 'nodered', prefix: 'N' },
] as const;
type Role = (typeof SIDE_BY_SIDE)[number]['role'];

/**
 * BENCH_WATCH_SEATS=file:clientmsg,nodered:watchermsg puts another contender in
 * a role's seat (see ContenderKind), to split our node into its layers while
 * working on it; the tables keep the role's name. Printed only, like the other
 * BENCH_WATCH_ settings: never to the results files.
 */
const SEATS = new Map(
  (process.env.BENCH_WATCH_SEATS ?? '')
    .split(',')
    .filter(Boolean)
    .map((seat) => {
      const [role, kind] = seat.split(':');
      // A typo would otherwise measure the usual contender under a name the reader takes for another.
      if (!SIDE_BY_SIDE.some((c) => c.role === role) || !CONTENDER_KINDS.includes(kind as ContenderKind)) {
        throw new Error(`BENCH_WATCH_SEATS: "${seat}" is not role:kind with a role of ${SIDE_BY_SIDE.map((c) => c.role).join(', ')} and a kind of ${CONTENDER_KINDS.join(', ')}`);
      }
      return [role as Role, kind as ContenderKind] as const;
    }),
);
const kindOf = (c: (typeof SIDE_BY_SIDE)[number]): ContenderKind => SEATS.get(c.role) ?? c.kind;

/**
 * N tokens watched at a 10 s interval, every poll an event (the bench server's
 * meter moves on every query), state kept in the memory store and in
 * localfilesystem, beside bare axios polling as many tokens on the same
 * schedule, and a second bare axios. Each contender runs in its own process
 * (bench/contender.ts, a real Node-RED each) and all of them poll at once; every
 * window is opened and closed for all of them together and each measures its
 * own CPU, so a ratio compares the same seconds of this machine.
 */
async function watchScale(): Promise<string> {
  const rows: string[] = [];
  const getsBy = () => ask<Record<string, number>>('getsBy', 'getsBy');
  const procs = await Promise.all(SIDE_BY_SIDE.map(() => spawnContender(WATCH_INTERVAL_MS / 1000)));
  const all = (m: ContenderCommand) => Promise.all(procs.map((p) => p.call(m)));
  /** CPU ms of each contender over one window, all opened and closed together, and the polls each made in it */
  const window = async (seconds: number): Promise<{ cpuMs: number[]; polls: Record<string, number> }> => {
    const g0 = await getsBy();
    await all({ cmd: 'begin' });
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const ends = await all({ cmd: 'end' });
    const g1 = await getsBy();
    return { cpuMs: ends.map((e) => e.cpuMs), polls: Object.fromEntries(SIDE_BY_SIDE.map((c) => [c.prefix, (g1[c.prefix] ?? 0) - (g0[c.prefix] ?? 0)])) };
  };
  /**
   * Process i runs contender (i + s·w) mod 5 in window w, with the step s = 1 in the first rotation, 2 in the
   * second, then 3 and 4 (each coprime with 5): within a rotation every contender sits in every process once,
   * and from one rotation to the next each contender follows another one in its process. With s = 1 always,
   * bare always followed ours with localfilesystem and bareB always followed bare, and the A/A read 1.10 at
   * 100 tokens in both rotations (75aa07a): what a process keeps of its last contender may stay with one.
   */
  const seatOf = (i: number, w: number) => {
    const k = SIDE_BY_SIDE.length;
    const step = 1 + (Math.floor(w / k) % (k - 1));
    return SIDE_BY_SIDE[(i + step * w) % k];
  };
  const startAll = (n: number, w: number) => Promise.all(procs.map((p, i) => p.call({ cmd: 'start', kind: kindOf(seatOf(i, w)), n, prefix: seatOf(i, w).prefix })));
  let warm = false;
  for (const n of WATCH_SIZES) {
    const seconds = WATCH_SECONDS;
    // Each process's own idle CPU (Node-RED's timers), subtracted from its windows: four quarter windows, the
    // median taken, after a GC and one interval. V8's memory reducer compacts an idle heap some seconds after
    // allocation stops (~130 ms of CPU 25 s after start-up, seen in one quarter): that is not what idle costs.
    await all({ cmd: 'heap' });
    await new Promise((r) => setTimeout(r, WATCH_INTERVAL_MS));
    const quarters: number[][] = [];
    for (let q = 0; q < 4; q++) quarters.push((await window(seconds / 4)).cpuMs);
    const idle = procs.map((_, i) => 4 * median(quarters.map((w) => w[i])));
    const heap0 = await all({ cmd: 'heap' });
    if (!warm) {
      // Every process runs every contender's code for a while before the first window, so that each has it compiled.
      for (let r = 0; r < SIDE_BY_SIDE.length; r++) {
        await startAll(Math.max(n, WATCH_WARMUP_TOKENS), r);
        await new Promise((res) => setTimeout(res, WATCH_WARMUP_MS / SIDE_BY_SIDE.length));
        await all({ cmd: 'stop' });
      }
      warm = true;
    }
    /** CPU ms (idle subtracted) and polls of each contender in each window */
    const cpu: Record<Role, number[]> = { mem: [], file: [], bare: [], bareB: [], nodered: [] };
    const polls: Record<Role, number[]> = { mem: [], file: [], bare: [], bareB: [], nodered: [] };
    let last = 0;
    const windows = watchWindows(n);
    for (let w = 0; w < windows; w++) {
      // A new seat for every contender in every window (see seatOf), so that
      // neither a process's place in the machine's schedule nor its timers' phase stays with one contender.
      if (w > 0) await all({ cmd: 'stop' });
      await startAll(n, w);
      last = w;
      await new Promise((r) => setTimeout(r, WATCH_SETTLE_MS));
      const got = await window(seconds);
      procs.forEach((_, i) => {
        const c = seatOf(i, w);
        cpu[c.role].push(got.cpuMs[i] - idle[i]);
        polls[c.role].push(got.polls[c.prefix]);
      });
      console.log(`watch ${n} window ${w + 1}: ${SIDE_BY_SIDE.map((c) => `${c.role} ${((cpu[c.role][w] * 1000) / Math.max(1, polls[c.role][w])).toFixed(0)} µs/poll (${polls[c.role][w]}, process ${procs.findIndex((_, i) => seatOf(i, w) === c)})`).join(', ')}`);
    }
    const loop = await procs[procs.findIndex((_, i) => seatOf(i, last).role === 'mem')].call({ cmd: 'loop', ms: 3000 });
    const heap1 = await all({ cmd: 'heap' });
    await all({ cmd: 'stop' });
    const heap2 = await all({ cmd: 'heap' });
    /**
     * CPU per poll of a contender over windows [from, to): its CPU (idle subtracted) over its polls, in all.
     * Over whole rotations every contender sat in every process for as long, so what a process's seat
     * adds or saves falls on all of them alike; a per-window ratio keeps it (bareB/bare spread 0.65-1.07).
     */
    const perPoll = (roles: Role[], from = 0, to = windows) => {
      let ms = 0;
      let count = 0;
      for (const r of roles) for (let w = from; w < to; w++) {
        ms += cpu[r][w];
        count += polls[r][w];
      }
      return (ms * 1000) / Math.max(1, count);
    };
    const ROTATION = SIDE_BY_SIDE.length;
    const rotations = Math.floor(windows / ROTATION);
    /** ours over the floor (both bare contenders, pooled), in all, and [min-max] over whole rotations */
    const ratio = (a: Role, floor: Role[] = ['bare', 'bareB']) => {
      const all = perPoll([a]) / perPoll(floor);
      const each = Array.from({ length: rotations }, (_, k) => perPoll([a], k * ROTATION, (k + 1) * ROTATION) / perPoll(floor, k * ROTATION, (k + 1) * ROTATION));
      // --quick has fewer windows than one rotation: no range to give.
      return each.length === 0 ? all.toFixed(2) : `${all.toFixed(2)} [${Math.min(...each).toFixed(2)}–${Math.max(...each).toFixed(2)}]`;
    };
    /** KiB per session freed by unwatching; from before the add (fixed costs included); KiB held after unwatching */
    const heapOf = (i: number) => ({ freed: (heap1[i].heap - heap2[i].heap) / 1024 / n, all: (heap1[i].heap - heap0[i].heap) / 1024 / n, held: (heap2[i].heap - heap0[i].heap) / 1024 });
    const hm = heapOf(procs.findIndex((_, i) => seatOf(i, last).role === 'mem'));
    const hf = heapOf(procs.findIndex((_, i) => seatOf(i, last).role === 'file'));
    const pollsCell = SIDE_BY_SIDE.map((c) => `${c.role} ${median(polls[c.role])}`).join(', ');
    rows.push(
      `| ${n} | ${seconds} s × ${windows}, ~${(n * seconds * 1000) / WATCH_INTERVAL_MS} expected: ${pollsCell} | ${perPoll(['mem']).toFixed(0)} | ${perPoll(['file']).toFixed(0)} | ${perPoll(['bare', 'bareB']).toFixed(0)} | ${ratio('mem')} | ${ratio('file')} | ${ratio('bareB', ['bare'])} | ${perPoll(['nodered']).toFixed(0)} | ${ratio('nodered')} | ${ratio('mem', ['nodered'])} | ${hm.freed.toFixed(2)} / ${hf.freed.toFixed(2)} | ${hm.all.toFixed(2)} / ${hf.all.toFixed(2)} | ${hm.held.toFixed(0)} / ${hf.held.toFixed(0)} | ${loop.p99.toFixed(1)} | ${idle.map((x) => x.toFixed(0)).join(' / ')} |`,
    );
    console.log(rows.at(-1));
  }
  await Promise.all(procs.map((p) => p.exit()));
  return [
    `### 5. Watching N sessions at a ${WATCH_INTERVAL_MS / 1000} s interval, side by side; the meter advances on every poll, so every poll emits an event`,
    '',
    `Five processes poll at the same time, each a real Node-RED with the same flow (bench/contender.ts): our watch node with its state in the memory store (mem), our watch node with localfilesystem (file: contextStore "file", its default 30 s flush), bare axios configured as the client configures it plus JSON.parse, polling as many tokens on the same schedule from one timer (bare), a second bare axios (bareB), and bare axios again with each record sent on as one Node-RED message from a minimal node to the same sink (nodered: what Node-RED's own message passing costs any node that emits one event per poll; beside the floor, not in it). Each polls tokens of its own, counted by the server. Every window is opened and closed for all five together and each process measures its own CPU (process.cpuUsage, all its threads, GC included), so every contender meets the same seconds of this shared machine; and in every window each contender sits in another process (process i runs contender (i + s·w) mod 5, with s = 1 in the first rotation, 2 in the second, then 3 and 4, so that each contender also follows another one in its process from one rotation to the next), started afresh and polling for ${WATCH_SETTLE_MS / 1000} s before the window, so that no process's place in the machine's schedule stays with one contender. Before the first size every process runs every contender for ${WATCH_WARMUP_MS / SIDE_BY_SIDE.length / 1000} s at ${Math.max(WATCH_SIZES[0], WATCH_WARMUP_TOKENS)} tokens (an install watches for months: its code is compiled; what compiles it is calls, and at 100 tokens a warm-up at 100 tokens left V8 still optimising in the windows). ${WATCH_SIZES.map((n) => `${watchWindows(n)} windows at ${n} tokens (${Math.floor(watchWindows(n) / SIDE_BY_SIDE.length)} whole rotations)`).join(', ')}: at 100 tokens a poll costs the most and polls are fewest, and two rotations did not settle its ratios. CPU per poll: a contender's CPU over all its windows, each process's idle CPU subtracted (four times the median of four idle quarter windows), over its polls; the floor is both bare contenders pooled; ratios are in all, [min–max] over the rotations. bareB / bare is the method's own noise: the same code in two seats. Heap per session (in the processes that ran ours in the last window): after GC, what unwatching the sessions frees, divided by N; beside it the figure from before the tokens were added (fixed costs included: compiled code, pooled sockets), and what stays after unwatching (KiB, not per session).`,
    '',
    '| sessions | window × count, polls per window (median) | ours µs/poll, memory | ours µs/poll, localfilesystem | bare µs/poll (both) | ours/bare, memory | ours/bare, localfilesystem | bareB/bare (A/A) | nodered µs/poll | nodered/bare | ours (memory)/nodered | heap KiB/session memory / localfilesystem (freed by unwatching) | heap KiB/session from before the add | KiB held after unwatching, memory / localfilesystem | event-loop p99 ms (mem, 3 s after the windows) | idle CPU ms per window (subtracted), mem / file / bare / bareB / nodered |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/**
 * Tokens added one per message (`msg.topic = "watch"`), as a depot adds one when
 * a session starts: N messages, CPU and time per message, state in memory and
 * in localfilesystem. The interval is a day so that polls do not count.
 */
async function watchAdds(): Promise<string> {
  const rows: string[] = [];
  await red.deploy(watchFlow(base, 86_400));
  red.onSink(() => undefined);
  for (const n of ADD_SIZES) {
    const cells: string[] = [];
    for (const id of ['w-mem', 'w-file']) {
      const node = red.node(id);
      const perMsg: number[] = [];
      for (let r = 0; r < (n >= 100_000 ? 1 : 3); r++) {
        global.gc?.();
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < n; i++) node.receive({ topic: 'watch', payload: `A${r}-${i}` });
        await new Promise((res) => setImmediate(res));
        const cpu = process.cpuUsage(cpu0);
        perMsg.push((cpu.user + cpu.system) / n);
        node.receive({ topic: 'unwatch', payload: '*' });
        await new Promise((res) => setTimeout(res, 200));
      }
      cells.push(spread(perMsg, 1));
    }
    rows.push(`| ${n} | ${cells.join(' | ')} |`);
    console.log(rows.at(-1));
  }
  return [
    '### 5a. Adding tokens one per message (`msg.topic = "watch"`, one token each)',
    '',
    'CPU per message, µs, median [min–max] of 3 runs (1 run at 100 000), including Node-RED delivering each message to the node and the state written to the context store.',
    '',
    '| tokens added | memory store | localfilesystem |',
    '|---|---|---|',
    ...rows,
  ].join('\n');
}

/** A fresh process each time: require + init + start of Node-RED with one configuration and one progress node, with and without this package. */
function coldStart(): string {
  const script = path.join(__dirname, 'coldstart.js');
  const runs: Record<'with' | 'without', Array<{ ms: number; cpuMs: number; heapMiB: number; proxyAgents: boolean; ourModules: number }>> = { with: [], without: [] };
  for (let r = 0; r < (QUICK ? 2 : 7); r++) {
    for (const mode of r % 2 ? (['without', 'with'] as const) : (['with', 'without'] as const)) {
      const res = spawnSync(process.execPath, ['--expose-gc', script, mode], { encoding: 'utf8', timeout: 60_000 });
      const line = res.stdout.split('\n').find((l) => l.startsWith('{'));
      if (!line) throw new Error(`cold start (${mode}) failed:\n${res.stdout}\n${res.stderr}`);
      runs[mode].push(JSON.parse(line));
    }
  }
  const m = (mode: 'with' | 'without', k: 'ms' | 'cpuMs' | 'heapMiB') => median(runs[mode].map((x) => x[k]));
  const row = (mode: 'with' | 'without') => `| ${mode} this package | ${m(mode, 'ms').toFixed(0)} | ${m(mode, 'cpuMs').toFixed(0)} | ${m(mode, 'heapMiB').toFixed(1)} |`;
  return [
    `### 6. Cold start: a fresh process, require + init + start until the flows run (median of ${runs.with.length})`,
    '',
    '| | time to flows started, ms | CPU ms | heap after GC, MiB |',
    '|---|---|---|---|',
    row('without'),
    row('with'),
    `| added by the package | ${(m('with', 'ms') - m('without', 'ms')).toFixed(0)} | ${(m('with', 'cpuMs') - m('without', 'cpuMs')).toFixed(0)} | ${(m('with', 'heapMiB') - m('without', 'heapMiB')).toFixed(1)} |`,
    '',
    `Proxy agents loaded with no proxy configured: ${runs.with.some((x) => x.proxyAgents) ? 'yes' : 'no'}; modules of this package loaded: ${runs.with[0].ourModules}.`,
  ].join('\n');
}

function sinkRouter(msg: Record<string, unknown>): void {
  const n = msg._bench as number;
  const done = waiting.get(n);
  if (done) {
    waiting.delete(n);
    done();
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  server = fork(path.join(__dirname, 'server.js'));
  const port = await new Promise<number>((resolve) => server.once('message', (m: { port: number }) => resolve(m.port)));
  base = `http://127.0.0.1:${port}`;
  red = await EmbeddedNodeRed.start({
    chargingSession: { minPollIntervalSec: 1 },
    functionGlobalContext: {},
    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } },
  });
  red.onSink(sinkRouter);
  // The best case for the hand-made flow: a token fetched once beforehand, never renewed.
  const tok = await axios.post(`${base}/auth/v1/token`, 'grant_type=client_credentials', { proxy: false });
  await red.deploy([{ id: 'tab', type: 'tab', label: 'setup' }, { id: 'set', type: 'function', z: 'tab', func: `global.set('benchToken', ${JSON.stringify(tok.data.access_token)}); global.set('benchUrl', ${JSON.stringify(`${base}/poi/v1/charging-sessions`)}); return null;`, outputs: 1, libs: [], wires: [[]] }]);
  red.node('set').receive({});
  await new Promise((r) => setTimeout(r, 200));

  const fleet = () => fleetSection({ red, base, quick: QUICK, getsBy: () => ask('getsBy', 'getsBy'), counts, closedLoop, throughNode, median, spread });
  const sections = THROUGHPUT_ONLY
    ? [await throughput()]
    : FLEET_ONLY
    ? [await fleet()]
    : WATCH_ONLY
    ? [...(process.env.BENCH_WATCH_SIZES ? [] : [await watchAdds()]), await watchScale()]
    : [await throughput(), await statusWithEditor(), await maxInFlight(), await singleFlight(), await watchAdds(), await watchScale(), coldStart(), await fleet()];
  await red.stop();
  server.send({ cmd: 'exit' });
  const date = new Date().toISOString().slice(0, 10);
  const md = [
    `# Benchmark results ${date}${WATCH_ONLY ? ' (watch mode only: --watch)' : FLEET_ONLY ? ' (coordination only: --fleet)' : ''}`,
    '',
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, Node-RED ${require('node-red/package.json').version}, axios ${require('axios/package.json').version}${QUICK ? ' — QUICK run' : ''}. Took ${Math.round((Date.now() - started) / 1000)} s.`, // eslint-disable-line @typescript-eslint/no-require-imports
    '',
    ...sections.flatMap((s) => [s, '']),
  ].join('\n');
  console.log(`\n${md}`);
  if (!QUICK && !THROUGHPUT_ONLY && SEATS.size === 0 && !process.env.BENCH_WATCH_SIZES && !process.env.BENCH_WATCH_SETTLE_MS && !process.env.BENCH_WATCH_WINDOWS && !process.env.BENCH_WATCH_WARMUP_MS && !process.env.BENCH_WATCH_WARMUP_TOKENS) {
    const dir = path.join(__dirname, '..', '..', 'bench', 'results');
    fs.mkdirSync(dir, { recursive: true });
    if (FLEET_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-fleet.md`), md);
    } else if (WATCH_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-watch.md`), md);
    } else {
      fs.writeFileSync(path.join(dir, `${date}.md`), md);
      fs.writeFileSync(path.join(dir, 'latest.md'), md);
    }
  }
  process.exit(0);
}

void main();
