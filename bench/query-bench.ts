/**
 * The message sections of `npm run bench`, in this process's Node-RED: progress
 * queries side by side with axios and core http request (throughput, CPU per
 * message, latency), status traffic with an editor connected, Max in flight
 * against a service that takes 20 ms, and the token's single flight.
 */
import http from 'node:http';
import axios from 'axios';
import { DEFAULT_MAX_IN_FLIGHT } from '../nodes/lib/client/service-client';
import { a0Client, Drive } from './floor';
import { BenchContext, closedLoop, median, Sample, spread } from './measure';
import { QUICK } from './options';
import type { FlowNode } from './runtime';

const CONCURRENCY = process.env.BENCH_CONCURRENCY ? process.env.BENCH_CONCURRENCY.split(',').map(Number) : [1, 10, 100];
const ROUNDS = QUICK ? 2 : 7;
const MESSAGES: Record<number, number> = QUICK ? { 1: 300, 10: 800, 100: 800 } : { 1: 1500, 10: 4000, 100: 4000 };

/** axios with its defaults and a keep-alive agent (follow-redirects, JSON parsing, params): what many users write. Not the floor. */
function axiosDefaults(base: string): { drive: Drive; close(): void } {
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
function throughputFlow(base: string, conc: number): FlowNode[] {
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

export async function throughput({ red, server: { base }, throughNode }: BenchContext): Promise<string> {
  const rows: string[] = [];
  const ratioRows: string[] = [];
  for (const conc of CONCURRENCY) {
    await red.deploy(throughputFlow(base, conc));
    const a0 = a0Client(base, DEFAULT_MAX_IN_FLIGHT);
    const inNode = a0Client(base, DEFAULT_MAX_IN_FLIGHT);
    (global as unknown as { __benchA0: (t: string) => Promise<unknown> }).__benchA0 = inNode.query;
    const ad = axiosDefaults(base);
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
export async function statusWithEditor({ red, server: { base }, throughNode }: BenchContext): Promise<string> {
  await red.deploy(throughputFlow(base, 10));
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
export async function maxInFlight({ red, server, throughNode }: BenchContext): Promise<string> {
  const base = server.base;
  await server.setLatency(20);
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
  await server.setLatency(0);
  return [
    '### 3. Max in flight: progress queries per second against a service answering in 20 ms',
    '',
    `| concurrency | ${limits.map((m) => `Max in flight ${m}`).join(' | ')} |`,
    `|---|${limits.map(() => '---').join('|')}|`,
    ...rows,
  ].join('\n');
}

export async function singleFlight({ red, server, throughNode }: BenchContext): Promise<string> {
  const base = server.base;
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
    await server.reset();
    const t0 = performance.now();
    let first = 0;
    const drives = Array.from({ length: 20 }, (_, i) => throughNode(`p${i}`));
    await Promise.all(Array.from({ length: 1000 }, (_, i) => drives[i % 20](i).then(() => (first ||= performance.now() - t0))));
    firsts.push(first);
    tokenCounts.push((await server.counts()).token);
  }
  return [
    '### 4. Token single flight: 1000 messages at once across 20 nodes sharing one configuration',
    '',
    '| token requests (each round) | first answer after (ms, median; the token endpoint takes 20 ms) |',
    '|---|---|',
    `| ${tokenCounts.join(', ')} | ${median(firsts).toFixed(1)} |`,
  ].join('\n');
}
