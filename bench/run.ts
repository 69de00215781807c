/**
 * `npm run bench`: side-by-side measurements in one run, medians of several
 * rounds. Not part of npm test. Loopback only, bounded in time.
 *
 *   npm run bench -- --quick      fewer requests and rounds (a smoke run)
 */
import { fork, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import axios from 'axios';
import helper from 'node-red-node-test-helper';
import type { Node } from 'node-red';

const QUICK = process.argv.includes('--quick');
const ROUNDS = QUICK ? 1 : 3;
const REQUESTS: Record<number, number> = QUICK ? { 1: 200, 10: 500, 100: 1000 } : { 1: 1000, 10: 3000, 100: 6000 };
const WATCH_SIZES = [100, 1000, 10000];
const WATCH_SECONDS = QUICK ? 6 : 20;
const WATCH_INTERVAL_MS = 10_000;

// ------------------------------------------------------------------ server
let server: ChildProcess;
let base = '';
function ask<T>(cmd: string, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>) => {
      if (key in m) {
        server.off('message', on);
        resolve(m[key] as T);
      }
    };
    server.on('message', on);
    server.send({ cmd });
  });
}
async function startServer(): Promise<void> {
  server = fork(path.join(__dirname, 'server.js'));
  const port = await new Promise<number>((resolve) => server.once('message', (m: { port: number }) => resolve(m.port)));
  base = `http://127.0.0.1:${port}`;
}
type Counts = { token: number; get: number; post: number; firstGetAt: number };
const counts = () => ask<Counts>('counts', 'counts');
const reset = () => ask<boolean>('reset', 'reset');

// ------------------------------------------------------------------ runtime
/* eslint-disable @typescript-eslint/no-require-imports */
const NODES = ['charging-service', 'charging-start', 'charging-progress', 'charging-stop'].map((n) => require(`../nodes/${n}`));
const NR = path.dirname(require.resolve('node-red/package.json'));
const CORE = (p: string) => require(require.resolve(`@node-red/nodes/core/${p}`, { paths: [NR] }));
const CORE_NODES = [CORE('function/10-function.js'), CORE('network/21-httprequest.js')];
/* eslint-enable @typescript-eslint/no-require-imports */

type AnyNode = Node & { receive(m: unknown): void; updateWires?(w: unknown): void };

async function deploy(flow: Array<Record<string, unknown>>, maxInFlight: number): Promise<void> {
  await helper.unload();
  const full: Array<Record<string, unknown>> = [{ id: 'f1', type: 'tab' }, { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, maxInFlight, allowInsecureHttp: false }, ...flow.map((n) => ({ z: 'f1', ...n }))];
  await helper.load([...NODES, ...CORE_NODES], full as Parameters<typeof helper.load>[1], { svc: { clientId: 'bench', clientSecret: 'bench-secret' } });
  // The test helper wraps Node.prototype methods in sinon spies that record every call; take them off,
  // and rewire the nodes (Node-RED copies send onto each wired node), so that we measure Node-RED, not sinon.
  (helper as unknown as { _sandbox: { restore(): void } })._sandbox.restore();
  for (const n of full) {
    const node = helper.getNode(String(n.id)) as AnyNode | null;
    if (node && 'wires' in n) node.updateWires?.(n.wires);
  }
}

// ------------------------------------------------------------------ measuring
interface Sample {
  rps: number;
  p50: number;
  p99: number;
}
function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
function summarise(latencies: number[], ms: number): Sample {
  latencies.sort((a, b) => a - b);
  return { rps: (latencies.length / ms) * 1000, p50: pct(latencies, 50), p99: pct(latencies, 99) };
}

/** Keeps `conc` requests outstanding until `total` are done; one() resolves when a request completes. */
async function closedLoop(total: number, conc: number, one: (i: number) => Promise<void>): Promise<Sample> {
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  async function lane(): Promise<void> {
    while (next < total) {
      const i = next++;
      const s = performance.now();
      await one(i);
      lat.push(performance.now() - s);
    }
  }
  await Promise.all(Array.from({ length: conc }, lane));
  return summarise(lat, performance.now() - t0);
}

async function rawAxios(total: number, conc: number): Promise<Sample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  const ax = axios.create({ httpAgent: agent, proxy: false, headers: { Authorization: 'Bearer bench-token-value', Accept: 'application/json' } });
  try {
    return await closedLoop(total, conc, async (i) => {
      const r = await ax.get(`${base}/poi/v1/charging-sessions`, { params: { token: `T${i}` } });
      if (r.status !== 200) throw new Error(`status ${r.status}`);
    });
  } finally {
    agent.destroy();
  }
}

/** Sends a message into a node and waits for it at the sink, matched by a sequence number. */
function nodeDriver(entry: string, sink: string): (i: number) => Promise<void> {
  const waiting = new Map<number, () => void>();
  (helper.getNode(sink) as AnyNode).on('input', (m: Record<string, unknown>) => {
    const done = waiting.get(m._seq as number);
    waiting.delete(m._seq as number);
    done?.();
  });
  const node = helper.getNode(entry) as AnyNode;
  return (i) =>
    new Promise<void>((resolve) => {
      waiting.set(i, resolve);
      node.receive({ _seq: i, payload: { token: `T${i}` } });
    });
}

async function ours(total: number, conc: number): Promise<Sample> {
  await deploy([{ id: 'p', type: 'charging-progress', service: 'svc', wires: [['sink']] }, { id: 'sink', type: 'helper' }], conc);
  const drive = nodeDriver('p', 'sink');
  await drive(-1); // token and first connection, outside the measurement as for (a) and (c)
  return closedLoop(total, conc, drive);
}

async function coreHttp(total: number, conc: number): Promise<Sample> {
  await deploy(
    [
      {
        id: 'fn',
        type: 'function',
        name: 'add token',
        func: "msg.url = global.get('benchUrl') + '?token=' + encodeURIComponent(msg.payload.token);\nmsg.headers = { Authorization: 'Bearer ' + global.get('benchToken'), Accept: 'application/json' };\nreturn msg;",
        outputs: 1,
        libs: [],
        wires: [['req']],
      },
      { id: 'req', type: 'http request', method: 'GET', ret: 'obj', paytoqs: 'ignore', url: '', persist: true, tls: '', proxy: '', insecureHTTPParser: false, authType: '', senderr: false, headers: [], wires: [['sink']] },
      { id: 'sink', type: 'helper' },
    ],
    conc,
  );
  const g = (helper.getNode('fn') as unknown as { context(): { global: { set(k: string, v: unknown): void } } }).context().global;
  // The best case for the hand-made flow: a token fetched once beforehand, never renewed.
  const tok = await axios.post(`${base}/auth/v1/token`, 'grant_type=client_credentials', { proxy: false, headers: { Authorization: `Basic ${Buffer.from('bench:bench-secret').toString('base64')}` } });
  g.set('benchToken', tok.data.access_token);
  g.set('benchUrl', `${base}/poi/v1/charging-sessions`);
  const drive = nodeDriver('fn', 'sink');
  await drive(-1);
  return closedLoop(total, conc, drive);
}

// ------------------------------------------------------------------ scenarios
async function throughput(): Promise<string> {
  const rows: string[] = [];
  for (const conc of [1, 10, 100]) {
    const a: Sample[] = [];
    const b: Sample[] = [];
    const c: Sample[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Interleaved, so that drift on a shared machine hits all three alike.
      a.push(await rawAxios(REQUESTS[conc], conc));
      b.push(await ours(REQUESTS[conc], conc));
      c.push(await coreHttp(REQUESTS[conc], conc));
    }
    const m = (xs: Sample[], k: keyof Sample) => median(xs.map((x) => x[k]));
    const f = (n: number, d = 0) => n.toFixed(d);
    rows.push(
      `| ${conc} | ${f(m(a, 'rps'))} | ${f(m(b, 'rps'))} | ${f(m(c, 'rps'))} | ${f(m(b, 'rps') / m(a, 'rps'), 2)} | ${f(m(b, 'rps') / m(c, 'rps'), 2)} | ${f(m(a, 'p50'), 2)} / ${f(m(a, 'p99'), 2)} | ${f(m(b, 'p50'), 2)} / ${f(m(b, 'p99'), 2)} | ${f(m(c, 'p50'), 2)} / ${f(m(c, 'p99'), 2)} |`,
    );
    console.log(rows.at(-1));
  }
  return [
    '### 1. Progress query: throughput (req/s) and latency (ms), medians of ' + ROUNDS + ' rounds',
    '',
    '(a) raw axios with keep-alive, the floor; (b) our `charging-progress` node; (c) core `http request` + a function node setting the Bearer header. (b) and (c) run in the same Node-RED runtime; max in flight = concurrency for (b).',
    '',
    '| concurrency | (a) req/s | (b) req/s | (c) req/s | (b)/(a) | (b)/(c) | (a) p50 / p99 | (b) p50 / p99 | (c) p50 / p99 |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

async function singleFlight(): Promise<string> {
  const times: number[] = [];
  const tokenCounts: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const flow: Array<Record<string, unknown>> = [{ id: 'sink', type: 'helper' }];
    for (let i = 0; i < 20; i++) flow.push({ id: `p${i}`, type: 'charging-progress', service: 'svc', wires: [['sink']] });
    await deploy(flow, 8);
    await reset();
    let got = 0;
    let firstAt = 0;
    const t0 = performance.now();
    const all = new Promise<void>((resolve) =>
      (helper.getNode('sink') as AnyNode).on('input', () => {
        if (got++ === 0) firstAt = performance.now();
        if (got === 1000) resolve();
      }),
    );
    for (let i = 0; i < 1000; i++) (helper.getNode(`p${i % 20}`) as AnyNode).receive({ payload: { token: `T${i}` } });
    await all;
    times.push(firstAt - t0);
    tokenCounts.push((await counts()).token);
  }
  return [
    '### 2. Token single flight: 1000 messages at once across 20 nodes sharing one config',
    '',
    '| token requests (each round) | time to first answer, median (ms; token endpoint answers in 20 ms) |',
    '|---|---|',
    `| ${tokenCounts.join(', ')} | ${median(times).toFixed(1)} |`,
  ].join('\n');
}

function openResources(): { timers: number; sockets: number } {
  const r = process.getActiveResourcesInfo();
  return { timers: r.filter((x) => x === 'Timeout').length, sockets: r.filter((x) => x === 'TCPSocketWrap').length };
}

async function watchScale(): Promise<string> {
  const rows: string[] = [];
  let idleCpuSec = 0;
  for (const n of [0, ...WATCH_SIZES]) {
    await deploy([{ id: 'w', type: 'charging-progress', service: 'svc', mode: 'watch', interval: WATCH_INTERVAL_MS / 1000, wires: [['sink']] }, { id: 'sink', type: 'helper' }], 8);
    const tokens = Array.from({ length: n }, (_, i) => `W${i}`);
    if (n > 0) (helper.getNode('w') as AnyNode).receive({ topic: 'watch', payload: tokens });
    await new Promise((r) => setTimeout(r, 1000)); // settle: token, sockets
    global.gc?.();
    await reset();
    const heap0 = process.memoryUsage().heapUsed;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const cpu0 = process.cpuUsage();
    let maxTimers = 0;
    let maxSockets = 0;
    const sampler = setInterval(() => {
      const o = openResources();
      maxTimers = Math.max(maxTimers, o.timers);
      maxSockets = Math.max(maxSockets, o.sockets);
    }, 250);
    await new Promise((r) => setTimeout(r, WATCH_SECONDS * 1000));
    clearInterval(sampler);
    delay.disable();
    const cpu = process.cpuUsage(cpu0);
    const polls = (await counts()).get;
    global.gc?.();
    const heapGrowth = (process.memoryUsage().heapUsed - heap0) / 1048576;
    const cpuSec = (cpu.user + cpu.system) / 1e6;
    if (n === 0) {
      // The runtime's own idle cost over the same time, subtracted below so that CPU per poll is the polls' cost.
      idleCpuSec = cpuSec;
      rows.push(`| 0 (idle baseline) | ${polls} | ${(cpuSec * 1000).toFixed(0)} ms in all | ${heapGrowth.toFixed(1)} | ${(delay.percentile(99) / 1e6).toFixed(1)} | ${maxTimers} | ${maxSockets} |`);
      console.log(rows.at(-1));
      continue;
    }
    const expected = (n * WATCH_SECONDS * 1000) / WATCH_INTERVAL_MS;
    rows.push(
      `| ${n} | ${polls} (${((polls / expected) * 100).toFixed(0)} % of ${expected}) | ${(((cpuSec - idleCpuSec) / Math.max(1, polls)) * 1e6).toFixed(0)} | ${heapGrowth.toFixed(1)} | ${(delay.percentile(99) / 1e6).toFixed(1)} | ${maxTimers} | ${maxSockets} |`,
    );
    console.log(rows.at(-1));
  }
  await helper.unload();
  return [
    `### 3. Watching: N sessions at a ${WATCH_INTERVAL_MS / 1000} s interval for ${WATCH_SECONDS} s (runtime process; the server is another process)`,
    '',
    '| sessions | polls made | CPU µs per poll (idle subtracted) | heap growth (MiB) | event-loop delay p99 (ms) | timers open (whole process, max) | sockets open (max) |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

async function coldStart(): Promise<string> {
  const times: number[] = [];
  for (let r = 0; r < 5; r++) {
    await helper.unload();
    await reset();
    const t0 = Date.now();
    await deploy([{ id: 'w', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: 'COLD-1', interval: 10, wires: [['sink']] }, { id: 'sink', type: 'helper' }], 8);
    for (let k = 0; k < 200; k++) {
      const c = await counts();
      if (c.firstGetAt) {
        times.push(c.firstGetAt - t0);
        break;
      }
      await new Promise((res) => setTimeout(res, 5));
    }
  }
  return ['### 4. Cold start: deploy to the first request at the service (watch mode, token included)', '', `| median of 5 (ms) | all (ms) |`, '|---|---|', `| ${median(times)} | ${times.join(', ')} |`].join('\n');
}

async function main(): Promise<void> {
  const started = Date.now();
  await startServer();
  helper.init(require.resolve('node-red'));
  helper.settings({ chargingSession: { minPollIntervalSec: 1 } } as Record<string, unknown>);
  await new Promise<void>((r) => helper.startServer(() => r()));
  const sections = [await throughput(), await singleFlight(), await watchScale(), await coldStart()];
  await helper.unload();
  await new Promise<void>((r) => helper.stopServer(() => r()));
  server.send({ cmd: 'exit' });
  const date = new Date().toISOString().slice(0, 10);
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const md = [
    `# Benchmark results ${date}`,
    '',
    `Machine: ${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, Node-RED ${require('node-red/package.json').version}${QUICK ? ' — QUICK run' : ''}. Took ${Math.round((Date.now() - started) / 1000)} s.`, // eslint-disable-line @typescript-eslint/no-require-imports
    '',
    ...sections.flatMap((s) => [s, '']),
  ].join('\n');
  console.log('\n' + md);
  if (!QUICK) {
    fs.mkdirSync(path.join(__dirname, '..', '..', 'bench', 'results'), { recursive: true });
    fs.writeFileSync(path.join(__dirname, '..', '..', 'bench', 'results', `${date}.md`), md);
    fs.writeFileSync(path.join(__dirname, '..', '..', 'bench', 'results', 'latest.md'), md);
  }
  process.exit(0);
}

void main();
