/**
 * A focused look at watch mode (#19.1), for working on it: one watch node
 * polling N tokens at a 10 s interval against the bench server, next to bare
 * axios (configured as the client configures it) polling the same tokens on the
 * same schedule, and idle, in rounds. Prints CPU per poll with idle subtracted.
 *
 *   node --expose-gc dist/bench/watch-profile.js [N] [seconds] [rounds] [kinds]
 *
 * kinds: comma-separated of mem, file, bare (default mem,bare). With
 * WATCH_PROFILE=prefix each measured window is also profiled (V8 sampling
 * profiler, in this process) to prefix-<kind>-<round>.cpuprofile.
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';
import { barePolling } from './floor';
import { EmbeddedNodeRed } from './runtime';

const INTERVAL_MS = 10_000;

/** CPU ticks per thread of this process (Linux /proc), by thread name: the main thread apart from GC helpers and libuv's pool. */
function threadTicks(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(f[11]) + Number(f[12]);
      const key = tid === String(process.pid) ? 'main' : name;
      out.set(key, (out.get(key) ?? 0) + ticks);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return out;
}


async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 1000);
  const seconds = Number(process.argv[3] ?? 15);
  const rounds = Number(process.argv[4] ?? 3);
  const kinds = (process.argv[5] ?? 'mem,bare').split(',');
  const server = fork(path.join(__dirname, 'server.js'));
  const port = await new Promise<number>((resolve) => server.once('message', (m: { port: number }) => resolve(m.port)));
  const base = `http://127.0.0.1:${port}`;
  const red = await EmbeddedNodeRed.start({ chargingSession: { minPollIntervalSec: 1 }, contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } } });
  red.onSink(() => undefined);
  await red.deploy([
    { id: 'tab', type: 'tab', label: 'watch' },
    { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'w-mem', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, wires: [['sink']] },
    { id: 'w-file', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, contextStore: 'file', wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ]);
  const tokens = Array.from({ length: n }, (_, i) => `W${i}`);
  /** GETs the service has answered so far: polls, counted where they arrive */
  const gets = () =>
    new Promise<number>((resolve) => {
      const on = (m: { counts?: { get: number } }) => {
        if (!m.counts) return;
        server.off('message', on);
        resolve(m.counts.get);
      };
      server.on('message', on);
      server.send({ cmd: 'counts' });
    });

  const session = process.env.WATCH_PROFILE ? new inspector.Session() : null;
  const post = (method: string, params?: object) => new Promise<unknown>((res, rej) => session?.post(method, params ?? {}, (err, out) => (err ? rej(err) : res(out))));
  if (session) {
    session.connect();
    await post('Profiler.enable');
    await post('HeapProfiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 200 });
  }
  /** CPU ms and events over one window of `seconds`, after a GC and a 2 s settle (the first polls of a round). */
  const window = async (label: string, polls: () => number | Promise<number>): Promise<{ cpuMs: number; polls: number }> => {
    global.gc?.();
    await new Promise((r) => setTimeout(r, 2000));
    if (session && process.env.WATCH_HEAP) await post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    else if (session) await post('Profiler.start');
    const p0 = await polls();
    const t0 = threadTicks();
    const cpu0 = process.cpuUsage();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpu = process.cpuUsage(cpu0);
    const p = (await polls()) - p0;
    const t1 = threadTicks();
    console.log(`  ${label}: ${[...t1].map(([k, v]) => [k, v - (t0.get(k) ?? 0)] as const).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v * 10} ms`).join(', ')}`);
    if (session && process.env.WATCH_HEAP) {
      const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
      fs.writeFileSync(`${process.env.WATCH_PROFILE}-${label}.heapprofile`, JSON.stringify(profile));
    } else if (session) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      fs.writeFileSync(`${process.env.WATCH_PROFILE}-${label}.cpuprofile`, JSON.stringify(profile));
    }
    return { cpuMs: (cpu.user + cpu.system) / 1000, polls: p };
  };

  const results: Record<string, number[]> = {};
  for (let r = 0; r < rounds; r++) {
    const idle = await window(`idle-${r}`, () => 0);
    const line: string[] = [`idle ${idle.cpuMs.toFixed(0)} ms`];
    for (const kind of kinds) {
      let w: { cpuMs: number; polls: number };
      if (kind === 'bare') {
        const b = barePolling(base, n, INTERVAL_MS);
        w = await window(`bare-${r}`, gets);
        b.stop();
      } else {
        const node = red.node(kind === 'file' ? 'w-file' : 'w-mem');
        node.receive({ topic: 'watch', payload: tokens });
        w = await window(`${kind}-${r}`, gets);
        node.receive({ topic: 'unwatch', payload: '*' });
      }
      await new Promise((res) => setTimeout(res, 500));
      const us = ((w.cpuMs - idle.cpuMs) * 1000) / Math.max(1, w.polls);
      (results[kind] ??= []).push(us);
      line.push(`${kind} ${us.toFixed(0)} µs/poll (${w.polls})`);
    }
    console.log(`round ${r + 1}: ${line.join(', ')}`);
  }
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  console.log(Object.entries(results).map(([k, v]) => `${k} median ${median(v).toFixed(0)} µs/poll`).join(', '));
  await red.stop();
  server.kill();
  process.exit(0);
}

void main();
