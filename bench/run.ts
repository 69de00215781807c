/**
 * `npm run bench`: side-by-side measurements in one run. Not part of npm test.
 * Loopback only; the service runs in its own process (bench/server.ts), Node-RED
 * in this one (bench/runtime.ts), so CPU per message is the runtime's.
 *
 *   npm run bench -- --quick     fewer rounds and messages (a smoke run; results not written)
 *   npm run bench -- --watch     only the watch-mode sections (written to a -watch results file)
 *   npm run bench -- --throughput   only section 1 (printed only); BENCH_CONCURRENCY=1,10 narrows it
 *   npm run bench -- --fleet     only section 7, coordination off vs on (bench/fleet.ts; written to a -fleet results file)
 *   npm run bench -- --ledger    only the ledger: CPU per event at 10 000 records, report and export of a month (bench/ledger.ts; a -ledger results file)
 *   npm run bench -- --metrics   only section 8, metrics wired vs not and scrape time (bench/metrics.ts; written to a -metrics results file)
 *   npm run bench -- --depot     only the depot section: CPU per control check without and with a depot (bench/depot.ts; a -depot results file)
 *
 * Contenders run interleaved, in an order rotated every round, each warmed up
 * before it is measured; ratios are computed within a round and reported as
 * median [min–max] over the rounds.
 *
 * This file runs the sections and writes the report; the sections are
 * query-bench.ts (messages), watch-bench.ts (watch mode), fleet.ts
 * (coordination) and the cold start below; measure.ts holds how they measure.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import axios from 'axios';
import { EmbeddedNodeRed } from './runtime';
import { BenchContext, median, messageDriver } from './measure';
import { DEPOT_ONLY, FLEET_ONLY, LEDGER_ONLY, METRICS_ONLY, QUICK, THROUGHPUT_ONLY, WATCH_ONLY } from './options';
import { ledgerSection } from './ledger';
import { maxInFlight, singleFlight, statusWithEditor, throughput } from './query-bench';
import { SEATS, watchAdds, watchScale } from './watch-bench';
import { startBenchServer } from './server';
import { fleetSection } from './fleet';
import { metricsSection } from './metrics';
import { depotSection } from './depot';

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

async function main(): Promise<void> {
  const started = Date.now();
  const server = await startBenchServer();
  const base = server.base;
  const red = await EmbeddedNodeRed.start({
    chargingSession: { minPollIntervalSec: 1 },
    functionGlobalContext: {},
    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } },
  });
  const ctx: BenchContext = { red, server, throughNode: messageDriver(red) };
  // The best case for the hand-made flow: a token fetched once beforehand, never renewed.
  const tok = await axios.post(`${base}/auth/v1/token`, 'grant_type=client_credentials', { proxy: false });
  await red.deploy([{ id: 'tab', type: 'tab', label: 'setup' }, { id: 'set', type: 'function', z: 'tab', func: `global.set('benchToken', ${JSON.stringify(tok.data.access_token)}); global.set('benchUrl', ${JSON.stringify(`${base}/poi/v1/charging-sessions`)}); return null;`, outputs: 1, libs: [], wires: [[]] }]);
  red.node('set').receive({});
  await new Promise((r) => setTimeout(r, 200));

  const fleet = () => fleetSection(ctx);
  const sections = LEDGER_ONLY
    ? [await ledgerSection(ctx)]
    : THROUGHPUT_ONLY
    ? [await throughput(ctx)]
    : FLEET_ONLY
    ? [await fleet()]
    : METRICS_ONLY
    ? [await metricsSection(ctx)]
    : DEPOT_ONLY
    ? [await depotSection(ctx)]
    : WATCH_ONLY
    ? [...(process.env.BENCH_WATCH_SIZES ? [] : [await watchAdds(ctx)]), await watchScale(ctx)]
    : [await throughput(ctx), await statusWithEditor(ctx), await maxInFlight(ctx), await singleFlight(ctx), await watchAdds(ctx), await watchScale(ctx), coldStart(), await fleet(), await metricsSection(ctx)];
  await red.stop();
  await server.exit();
  const date = new Date().toISOString().slice(0, 10);
  const md = [
    `# Benchmark results ${date}${WATCH_ONLY ? ' (watch mode only: --watch)' : LEDGER_ONLY ? ' (the ledger only: --ledger)' : FLEET_ONLY ? ' (coordination only: --fleet)' : METRICS_ONLY ? ' (metrics only: --metrics)' : DEPOT_ONLY ? ' (depot only: --depot)' : ''}`,
    '',
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, Node-RED ${require('node-red/package.json').version}, axios ${require('axios/package.json').version}${QUICK ? ' — QUICK run' : ''}. Took ${Math.round((Date.now() - started) / 1000)} s.`, // eslint-disable-line @typescript-eslint/no-require-imports
    '',
    ...sections.flatMap((s) => [s, '']),
  ].join('\n');
  console.log(`\n${md}`);
  if (!QUICK && !THROUGHPUT_ONLY && SEATS.size === 0 && !process.env.BENCH_WATCH_SIZES && !process.env.BENCH_WATCH_SETTLE_MS && !process.env.BENCH_WATCH_WINDOWS && !process.env.BENCH_WATCH_WARMUP_MS && !process.env.BENCH_WATCH_WARMUP_TOKENS) {
    const dir = path.join(__dirname, '..', '..', 'bench', 'results');
    fs.mkdirSync(dir, { recursive: true });
    if (LEDGER_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-ledger.md`), md);
    } else if (FLEET_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-fleet.md`), md);
    } else if (METRICS_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-metrics.md`), md);
    } else if (DEPOT_ONLY) {
      fs.writeFileSync(path.join(dir, `${date}-depot.md`), md);
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
