/**
 * charging-metrics, side by side (`npm run bench -- --metrics`): what the
 * metrics cost a request, and what a scrape costs.
 *
 * 1. CPU per progress query at concurrency 1 and 10, in this process (the
 *    service runs in its own, bench/server.ts): a ServiceClient with a
 *    configuration's metrics wired in (on) against one without (off), and a
 *    second one without (offB: the A/A, what the method cannot tell apart).
 *    The client alone, not a Node-RED node around it: the smallest
 *    denominator, so the strictest ratio; through a node the same added
 *    cost is a smaller share. Interleaved, the order rotated every round,
 *    each warmed up; ratios within a round, median [min–max] over rounds.
 *    And what a query adds, measured alone: the observer's calls a query
 *    makes (one finished(): a counter increment and a histogram observation),
 *    a million times, against the do-nothing default.
 * 2. Scrape time with 10 000 watched sessions: this process's Node-RED with
 *    a watch node of 10 000 tokens (every one a started session at the bench
 *    service, so the charging gauge counts them all) and http in (GET
 *    /metrics) → charging-metrics → http response: the whole GET over
 *    loopback, and the registry's scrape alone (time and CPU), with none
 *    watched and with 10 000.
 */
import { ServiceClient } from '../nodes/lib/client/service-client';
import { ChargingMetrics, runtimeMetrics } from '../nodes/lib/metrics/registry';
import { NO_CLIENT_METRICS, type ClientMetrics } from '../nodes/lib/metrics/observers';
import { parsePrometheusText, valueOf } from '../test/prometheus-text';
import type { Drive } from './floor';
import { BenchContext, closedLoop, median, pct, spread } from './measure';
import { QUICK } from './options';
import type { FlowNode } from './runtime';

const ROUNDS = QUICK ? 2 : 15;
const MESSAGES: Record<number, number> = QUICK ? { 1: 300, 10: 800 } : { 1: 2000, 10: 5000 };
const SCRAPES = QUICK ? 10 : 50;
const WATCHED = 10_000;

function client(base: string, wired: ChargingMetrics | null): { drive: Drive; close(): Promise<void> } {
  const metrics = wired?.configuration('bench', 'bench');
  const c = new ServiceClient({ baseUrl: base, authUrl: `${base}/auth`, clientId: 'bench', clientSecret: 'bench-secret', metrics });
  return {
    drive: (i) => c.getProgress(`T${i}`).then(() => undefined),
    close: async () => {
      metrics?.close();
      await c.close();
    },
  };
}

async function cpuPerQuery(base: string): Promise<string> {
  const rows: string[] = [];
  for (const conc of [1, 10]) {
    const contenders = { off: client(base, null), offB: client(base, null), on: client(base, new ChargingMetrics()) };
    const names = Object.keys(contenders) as Array<keyof typeof contenders>;
    const total = MESSAGES[conc];
    for (const n of names) await closedLoop(Math.max(200, total / 5), conc, contenders[n].drive);
    const ratios = { on: [] as number[], aa: [] as number[] };
    const cpu: Record<string, number[]> = { off: [], offB: [], on: [] };
    for (let r = 0; r < ROUNDS; r++) {
      const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
      const round: Record<string, number> = {};
      for (const n of order) round[n] = (await closedLoop(total, conc, contenders[n].drive)).cpuUs;
      for (const n of names) cpu[n].push(round[n]);
      ratios.on.push(round.on / round.off);
      ratios.aa.push(round.offB / round.off);
    }
    for (const n of names) await contenders[n].close();
    rows.push(`| ${conc} | ${median(cpu.off).toFixed(1)} | ${median(cpu.on).toFixed(1)} | ${spread(ratios.on, 3)} | ${spread(ratios.aa, 3)} |`);
    console.log(rows.at(-1));
  }
  return [
    `#### CPU per progress query, metrics wired (on) vs not (off), ${ROUNDS} rounds`,
    '',
    `Messages per run: ${MESSAGES[1]} / ${MESSAGES[10]} at concurrency 1 / 10. A ServiceClient against the bench service; on: the configuration's metrics (a counter increment and a histogram observation per query); offB: a second client without, the A/A.`,
    '',
    '| concurrency | CPU µs/query off | CPU µs/query on | on/off | A/A offB/off |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    callCost(),
  ].join('\n');
}

/** ns per query of the metrics' own calls: a million finished() on a configuration's metrics vs the do-nothing default, median of rounds. */
function callCost(): string {
  const n = QUICK ? 100_000 : 1_000_000;
  const m = new ChargingMetrics();
  const wired = m.configuration('bench', 'bench');
  const time = (metrics: ClientMetrics) => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) metrics.finished('progress', null, (i % 100) / 1000);
    return Number(process.hrtime.bigint() - t0) / n;
  };
  const on: number[] = [];
  const off: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    off.push(time(NO_CLIENT_METRICS));
    on.push(time(wired));
  }
  wired.close();
  return `The metrics' own work per query, measured alone (${n} calls of finished(), ${ROUNDS} rounds): ${median(on).toFixed(0)} ns with the metrics wired, ${median(off).toFixed(0)} ns for the do-nothing default: ${((median(on) - median(off)) / 1000).toFixed(2)} µs added per query.`;
}

function scrapeFlow(base: string): FlowNode[] {
  return [
    { id: 'tab', type: 'tab', label: 'metrics' },
    { id: 'svc', type: 'charging-service', name: 'bench', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: 60, wires: [[]] },
    { id: 'in', type: 'http in', z: 'tab', url: '/metrics', method: 'get', upload: false, swaggerDoc: '', wires: [['m']] },
    { id: 'm', type: 'charging-metrics', z: 'tab', name: '', wires: [['out']] },
    { id: 'out', type: 'http response', z: 'tab', statusCode: '', headers: {}, wires: [] },
  ];
}

interface ScrapeSample {
  httpMs: number[];
  directMs: number[];
  directCpuUs: number[];
  bytes: number;
}

async function scrapes(url: string): Promise<ScrapeSample> {
  const s: ScrapeSample = { httpMs: [], directMs: [], directCpuUs: [], bytes: 0 };
  for (let i = 0; i < SCRAPES; i++) {
    const t0 = performance.now();
    const res = await fetch(url);
    const text = await res.text();
    s.httpMs.push(performance.now() - t0);
    s.bytes = text.length;
    const c0 = process.cpuUsage();
    const t1 = performance.now();
    await runtimeMetrics().scrape('text');
    s.directMs.push(performance.now() - t1);
    const c = process.cpuUsage(c0);
    s.directCpuUs.push(c.user + c.system);
  }
  return s;
}

async function scrapeTime({ red, server: { base } }: BenchContext): Promise<string> {
  await red.deploy(scrapeFlow(base));
  const url = `${red.base}api/metrics`;
  const none = await scrapes(url);
  const tokens = Array.from({ length: WATCHED }, (_, i) => `M${i}`);
  red.node('w').receive({ topic: 'watch', payload: tokens });
  // Every token polled once (its session seen as charging), then the scrapes while the watch goes on.
  let charging = 0;
  for (let i = 0; i < 600 && charging < WATCHED; i++) {
    await new Promise((r) => setTimeout(r, 250));
    const families = parsePrometheusText((await runtimeMetrics().scrape('text')).body as string);
    charging = valueOf(families, 'chargectl_sessions_charging', { config: 'bench' }) ?? 0;
  }
  const text = await (await fetch(url)).text();
  const families = parsePrometheusText(text);
  const watched = valueOf(families, 'chargectl_watched_sessions', { config: 'bench' });
  const full = await scrapes(url);
  red.node('w').receive({ topic: 'unwatch', payload: '*' });
  const row = (what: string, s: ScrapeSample) =>
    `| ${what} | ${median(s.httpMs).toFixed(2)} / ${pct([...s.httpMs].sort((a, b) => a - b), 95).toFixed(2)} | ${median(s.directMs).toFixed(2)} / ${pct([...s.directMs].sort((a, b) => a - b), 95).toFixed(2)} | ${(median(s.directCpuUs) / 1000).toFixed(2)} | ${s.bytes} |`;
  return [
    `#### Scrape time, ${SCRAPES} scrapes each`,
    '',
    `A watch node polling ${WATCHED} tokens every 60 s in this Node-RED (its scrape read watched = ${watched}, charging = ${charging}); GET is the whole request through http in → charging-metrics → http response over loopback, the registry's scrape is runtimeMetrics().scrape('text') alone. Median / 95th percentile.`,
    '',
    '| watched sessions | GET /metrics ms | registry scrape ms | registry scrape CPU ms | bytes |',
    '|---|---|---|---|---|',
    row('0', none),
    row(String(WATCHED), full),
  ].join('\n');
}

export async function metricsSection(ctx: BenchContext): Promise<string> {
  const started = Date.now();
  const cpu = await cpuPerQuery(ctx.server.base);
  const scrape = await scrapeTime(ctx);
  return ['### 8. charging-metrics: CPU per query with the metrics wired vs not, and scrape time', '', `Took ${Math.round((Date.now() - started) / 1000)} s.`, '', cpu, '', scrape].join('\n');
}
