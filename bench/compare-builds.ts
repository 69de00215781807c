/**
 * Two builds of the client side by side in one run (issue 33): the build in
 * this dist/ and another one (a pristine copy at an earlier commit, built with
 * `node scripts/build.js` there), each in processes of its own, with the floor
 * (a0: axios configured exactly as the client configures it, this build's
 * axiosOptions) beside them. Not part of npm test.
 *
 *   node dist/bench/compare-builds.js /path/to/other/dist [rounds]
 *   node --expose-gc dist/bench/compare-builds.js /path/to/other/dist [rounds] --watch [tokens]
 *
 * 1. CPU per progress query at concurrency 1 and 10, default Max in flight,
 *    against bench/server.js (http, loopback): ServiceClient.getProgress of
 *    each build and a0, interleaved, order rotated every round; ratios within
 *    a round, median [min-max] over the rounds. Beside them, each build's
 *    charging-progress node in a Node-RED of its own (that build's
 *    bench/runtime.js), driven with messages as section 1 of `npm run bench`.
 * 2. START/STOP latency over https (a private CA, each command on a connection
 *    of its own, as the client sends them): median and p90 of each build,
 *    interleaved in blocks.
 *
 * With --watch instead: CPU per poll of each build's watch node side by side
 * (bench/compare-watch.ts).
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { compareWatch } from './compare-watch';
import { ChildCalls, serve } from './ipc';
import { messageDriver } from './measure';
import { startBenchServer } from './server';

type Kind = 'a0' | 'client' | 'node' | 'commands';
type Call = ({ cmd: 'run' } & Job) | { cmd: 'exit' };
interface Job {
  kind: Kind;
  dist: string;
  base: string;
  conc: number;
  total: number;
  ca?: string;
}
type Result = {
  cpuUs: number;
  n: number;
  latencies?: number[];
};

const FIXTURES = path.join(__dirname, '..', '..', 'test', 'fixtures');

// ------------------------------------------------------------------ child
/** A charging-progress node at its defaults in a Node-RED of its own, with the build's nodes installed (its bench/runtime.js). */
async function progressNode(job: Job): Promise<{ run(i: number): Promise<void>; close(): void }> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { EmbeddedNodeRed } = require(path.join(job.dist, 'bench', 'runtime.js')) as typeof import('./runtime');
  const red = await EmbeddedNodeRed.start();
  await red.deploy([
    { id: 'tab', type: 'tab', label: 'compare' },
    { id: 'svc', type: 'charging-service', baseUrl: job.base, authUrl: `${job.base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'b', type: 'charging-progress', z: 'tab', service: 'svc', wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ]);
  return { run: messageDriver(red)('b'), close: () => void red.stop() };
}

async function child(): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const clients = new Map<string, { run(i: number): Promise<void>; close(): void }>();
  serve<Call>(async (job) => {
    if (job.cmd === 'exit') {
      setImmediate(() => process.exit(0));
      return {};
    }
    const key = `${job.kind}:${job.dist}:${job.base}`;
    let c = clients.get(key);
    if (!c) {
      if (job.kind === 'a0') {
        const floor = require(path.join(job.dist, 'bench', 'floor.js')) as typeof import('./floor');
        const a0 = floor.a0Client(job.base, 32);
        c = { run: (i) => a0.drive(i), close: () => a0.close() };
      } else if (job.kind === 'node') {
        c = await progressNode(job);
      } else {
        const mod = require(path.join(job.dist, 'nodes', 'lib', 'client', 'service-client.js')) as typeof import('../nodes/lib/client/service-client');
        const client = new mod.ServiceClient({ baseUrl: job.base, authUrl: `${job.base}/auth`, clientId: 'bench', clientSecret: 'bench-secret', proxy: false, tls: job.ca ? { ca: job.ca } : undefined });
        c =
          job.kind === 'client'
            ? { run: (i) => client.getProgress(`T${i}`).then(() => undefined), close: () => void client.close() }
            : {
                run: (i) =>
                  client
                    .sendCommand(i % 2 ? { action: 'STOP', locationId: 'LOC-1', evseId: '1', token: `C${i - 1}`, transactionId: `TX-${i}` } : { action: 'START', locationId: 'LOC-1', evseId: '1', token: `C${i}` })
                    .then(() => undefined),
                close: () => void client.close(),
              };
      }
      clients.set(key, c);
    }
    const run = c.run;
    const latencies: number[] = [];
    let next = 0;
    const cpu0 = process.cpuUsage();
    await Promise.all(
      Array.from({ length: job.conc }, async () => {
        while (next < job.total) {
          const i = next++;
          const t = performance.now();
          await run(i);
          latencies.push(performance.now() - t);
        }
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    return { cpuUs: cpu.user + cpu.system, n: job.total, latencies: job.kind === 'commands' ? latencies : undefined } satisfies Result;
  });
  /* eslint-enable @typescript-eslint/no-require-imports */
}

// ------------------------------------------------------------------ parent
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const fmt = (xs: number[]) => `${median(xs).toFixed(2)} [${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}]`;

const ask = (proc: ChildCalls<Call>, job: Job): Promise<Result> => proc.call<Result>({ cmd: 'run', ...job });

/** A minimal https service for the command latency: a token and 202 for every command. */
async function httpsService(): Promise<{ base: string; ca: string; close(): void }> {
  const cert = fs.readFileSync(path.join(FIXTURES, 'sim-cert.pem'), 'utf8');
  const key = fs.readFileSync(path.join(FIXTURES, 'sim-key.pem'), 'utf8');
  const server = https.createServer({ key, cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url?.startsWith('/auth/')) return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: 'bench-token-value', token_type: 'Bearer', expires_in: 1800 }));
      res.writeHead(202, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { base: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, ca: cert, close: () => server.close() };
}

async function parent(): Promise<void> {
  const other = path.resolve(process.argv[2] ?? '');
  if (!fs.existsSync(path.join(other, 'nodes', 'lib', 'client', 'service-client.js'))) throw new Error('usage: node dist/bench/compare-builds.js /path/to/other/dist [rounds]');
  const ours = path.join(__dirname, '..');
  const rounds = Number(process.argv[3]) || 7;
  const server = await startBenchServer();
  if (process.argv.includes('--watch')) {
    console.log(await compareWatch({ server, ours, other, rounds, tokens: Number(process.argv[process.argv.indexOf('--watch') + 1]) || undefined }));
    return server.exit();
  }
  const base = server.base;
  const contenders: Array<[string, Kind, string]> = [
    ['a0 (axios as configured)', 'a0', ours],
    ['before (other build)', 'client', other],
    ['after (this build)', 'client', ours],
    ['before, its node', 'node', other],
    ['after, its node', 'node', ours],
  ];
  const procs = contenders.map(() => new ChildCalls<Call>(fork(__filename, ['--child'], { execArgv: ['--expose-gc'] })));
  const lines: string[] = [`Builds: before = ${other}, after = ${ours}. Node ${process.version}. ${rounds} rounds.`, ''];
  const nodeLines = ['', '### CPU per message through charging-progress in Node-RED (µs), default Max in flight', '', '| concurrency | before | after | after/before |', '|---|---|---|---|'];
  lines.push('### CPU per progress query (µs), default Max in flight', '', '| concurrency | a0 | before | after | before/a0 | after/a0 | after/before |', '|---|---|---|---|---|---|---|');
  for (const [conc, total] of [
    [1, 3000],
    [10, 8000],
  ]) {
    for (let i = 0; i < contenders.length; i++) await ask(procs[i], { kind: contenders[i][1], dist: contenders[i][2], base, conc, total: total / 2 }); // warm-up
    const per: number[][] = contenders.map(() => []);
    for (let r = 0; r < rounds; r++) {
      const order = contenders.map((_, i) => (i + r) % contenders.length);
      for (const i of order) {
        const res = await ask(procs[i], { kind: contenders[i][1], dist: contenders[i][2], base, conc, total });
        per[i].push(res.cpuUs / res.n);
      }
    }
    const ratio = (a: number, b: number) => per[a].map((x, r) => x / per[b][r]);
    lines.push(`| ${conc} | ${median(per[0]).toFixed(0)} | ${median(per[1]).toFixed(0)} | ${median(per[2]).toFixed(0)} | ${fmt(ratio(1, 0))} | ${fmt(ratio(2, 0))} | ${fmt(ratio(2, 1))} |`);
    nodeLines.push(`| ${conc} | ${median(per[3]).toFixed(0)} | ${median(per[4]).toFixed(0)} | ${fmt(ratio(4, 3))} |`);
  }
  lines.push(...nodeLines);
  const svc = await httpsService();
  lines.push('', '### START/STOP over https (private CA), one at a time, each on a connection of its own', '', '| build | median ms | p90 ms | CPU µs/command |', '|---|---|---|---|');
  const lat: number[][] = [[], []];
  const cpu: number[][] = [[], []];
  for (const i of [1, 2]) await ask(procs[i], { kind: 'commands', dist: contenders[i][2], base: svc.base, conc: 1, total: 50, ca: svc.ca });
  for (let r = 0; r < rounds; r++) {
    for (const i of r % 2 ? [2, 1] : [1, 2]) {
      const res = await ask(procs[i], { kind: 'commands', dist: contenders[i][2], base: svc.base, conc: 1, total: 100, ca: svc.ca });
      lat[i - 1].push(...(res.latencies ?? []));
      cpu[i - 1].push(res.cpuUs / res.n);
    }
  }
  for (const i of [0, 1]) lines.push(`| ${contenders[i + 1][0]} | ${median(lat[i]).toFixed(2)} | ${pct(lat[i], 90).toFixed(2)} | ${median(cpu[i]).toFixed(0)} |`);
  lines.push(`| after/before | ${(median(lat[1]) / median(lat[0])).toFixed(2)} | | ${(median(cpu[1]) / median(cpu[0])).toFixed(2)} |`);
  console.log(lines.join('\n'));
  svc.close();
  await Promise.all(procs.map((p) => p.exit()));
  await server.exit();
}

if (process.argv.includes('--child')) void child();
else
  parent().catch((err: Error) => {
    console.error(err.message);
    process.exit(1);
  });
