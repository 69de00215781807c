/**
 * A focused look at watch mode (#19.1), for working on it: one watch node
 * polling N tokens at a 10 s interval against the bench server, next to bare
 * axios (configured as the client configures it) polling the same tokens on the
 * same schedule, and idle, in rounds. Prints CPU per poll with idle subtracted.
 *
 *   node --expose-gc dist/bench/watch-profile.js [N] [seconds] [rounds] [kinds]
 *
 * kinds: comma-separated of mem, file, bare (default mem,bare), and, to split
 * ours into its layers: nodered (bare axios, each record sent on as one
 * Node-RED message from a minimal node to the same sink), client (ServiceClient.getProgress on bare's schedule, no
 * Node-RED) and watcher (SessionWatcher over a ServiceClient, events dropped). With
 * WATCH_PROFILE=prefix each measured window is also profiled (V8 sampling
 * profiler, in this process) to prefix-<kind>-<round>.cpuprofile (with
 * WATCH_HEAP=1 an allocation profile, .heapprofile, instead; WATCH_PROFILE_US sets the CPU sampling interval, default 200 µs). Each window also
 * prints the main thread's wake-ups (voluntary context switches) per poll; with
 * WATCH_NOGC=1 a window starts without the forced GC.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import { barePolling, messagePolling } from './floor';
import { ServiceClient } from '../nodes/lib/client/service-client';
import { SessionWatcher } from '../nodes/lib/session/watcher';
import { progressPoll } from '../nodes/common/watch-mode';
import { EmbeddedNodeRed } from './runtime';
import { startBenchServer } from './server';

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

/** Times the main thread blocked (voluntary context switches): wake-ups of the event loop, roughly. */
function wakeUps(): number {
  const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 1000);
  const seconds = Number(process.argv[3] ?? 15);
  const rounds = Number(process.argv[4] ?? 3);
  const kinds = (process.argv[5] ?? 'mem,bare').split(',');
  const server = await startBenchServer();
  const base = server.base;
  const red = await EmbeddedNodeRed.start({ chargingSession: { minPollIntervalSec: 1 }, contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } } });
  red.onSink(() => undefined);
  await red.deploy([
    { id: 'tab', type: 'tab', label: 'watch' },
    { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'w-mem', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, wires: [['sink']] },
    { id: 'w-file', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, contextStore: 'file', wires: [['sink']] },
    { id: 'floor', type: 'bench-minimal', z: 'tab', wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ]);
  const tokens = Array.from({ length: n }, (_, i) => `W${i}`);
  /** GETs the service has answered so far: polls, counted where they arrive */
  const gets = async () => (await server.counts()).get;

  const session = process.env.WATCH_PROFILE ? new inspector.Session() : null;
  const post = (method: string, params?: object) => new Promise<unknown>((res, rej) => session?.post(method, params ?? {}, (err, out) => (err ? rej(err) : res(out))));
  if (session) {
    session.connect();
    await post('Profiler.enable');
    await post('HeapProfiler.enable');
    await post('Profiler.setSamplingInterval', { interval: Number(process.env.WATCH_PROFILE_US ?? 200) });
  }
  /** CPU ms and polls over one window of `seconds`, after a GC and a settle (default one whole interval, WATCH_SETTLE_MS: every token polled once first). */
  const window = async (label: string, polls: () => number | Promise<number>, settleMs = Number(process.env.WATCH_SETTLE_MS ?? INTERVAL_MS)): Promise<{ cpuMs: number; polls: number }> => {
    if (!process.env.WATCH_NOGC) global.gc?.();
    await new Promise((r) => setTimeout(r, settleMs));
    if (session && process.env.WATCH_HEAP) await post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    else if (session) await post('Profiler.start');
    const p0 = await polls();
    const t0 = threadTicks();
    const w0 = wakeUps();
    const cpu0 = process.cpuUsage();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpu = process.cpuUsage(cpu0);
    const p = (await polls()) - p0;
    const t1 = threadTicks();
    const woke = wakeUps() - w0;
    console.log(`  ${label}: ${woke} wake-ups (${(woke / Math.max(1, p)).toFixed(2)}/poll), ${[...t1].map(([k, v]) => [k, v - (t0.get(k) ?? 0)] as const).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v * 10} ms`).join(', ')}`);
    if (session && process.env.WATCH_HEAP) {
      const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
      fs.writeFileSync(`${process.env.WATCH_PROFILE}-${label}.heapprofile`, JSON.stringify(profile));
    } else if (session) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      fs.writeFileSync(`${process.env.WATCH_PROFILE}-${label}.cpuprofile`, JSON.stringify(profile));
    }
    return { cpuMs: (cpu.user + cpu.system) / 1000, polls: p };
  };

  /** Starts one contender polling; returns its stop. */
  const begin = async (kind: string): Promise<() => Promise<void>> => {
    if (kind === 'bare') {
      const b = barePolling(base, n, INTERVAL_MS);
      return async () => b.stop();
    }
    if (kind === 'nodered') {
      // Bare axios, and each record passed on as one Node-RED message (a node wired to the same sink): what any node that sends an event per poll pays.
      const floor = red.node('floor');
      const polling = messagePolling(base, n, INTERVAL_MS, (msg) => floor.send(msg), 'W');
      return async () => polling.stop();
    }
    if (kind === 'client' || kind === 'watcher') {
      const client = new ServiceClient({ baseUrl: base, authUrl: `${base}/auth`, clientId: 'bench', clientSecret: 'bench-secret' });
      if (kind === 'client') {
        const b = barePolling(base, n, INTERVAL_MS, (i) => client.getProgress(`W${i}`, { priority: 'poll' }));
        return async () => {
          b.stop();
          await client.close();
        };
      }
      const watcher = new SessionWatcher(progressPoll(client, { priority: 'poll' }), { intervalMs: INTERVAL_MS }, () => undefined, () => undefined);
      watcher.watch(tokens);
      return async () => {
        watcher.close();
        await client.close();
      };
    }
    const node = red.node(kind === 'file' ? 'w-file' : 'w-mem');
    node.receive({ topic: 'watch', payload: tokens });
    return async () => node.receive({ topic: 'unwatch', payload: '*' });
  };

  // WATCH_WARMUP=s: before the rounds, each kind polls for s seconds once (the JIT warmed as in a long-running install).
  const warmup = Number(process.env.WATCH_WARMUP ?? 0);
  if (warmup > 0) {
    for (const kind of kinds) {
      const stop = await begin(kind);
      await new Promise((r) => setTimeout(r, warmup * 1000));
      await stop();
      await new Promise((res) => setTimeout(res, 500));
      console.log(`  warmed ${kind} for ${warmup} s`);
    }
  }
  // WATCH_CONSEC=k: each contender is measured in k windows in a row without stopping (the first after the settle), to see warm-up.
  const consecutive = Math.max(1, Number(process.env.WATCH_CONSEC ?? 1));
  const results: Record<string, number[]> = {};
  for (let r = 0; r < rounds; r++) {
    const idle = await window(`idle-${r}`, () => 0);
    const line: string[] = [`idle ${idle.cpuMs.toFixed(0)} ms`];
    for (const kind of kinds) {
      const stop = await begin(kind);
      for (let c = 0; c < consecutive; c++) {
        const w = await window(`${kind}-${r}${consecutive > 1 ? `.${c}` : ''}`, gets, c === 0 ? undefined : 0);
        const us = ((w.cpuMs - idle.cpuMs) * 1000) / Math.max(1, w.polls);
        const label = consecutive > 1 ? `${kind}.${c}` : kind;
        (results[label] ??= []).push(us);
        line.push(`${label} ${us.toFixed(0)} µs/poll (${w.polls})`);
      }
      await stop();
      await new Promise((res) => setTimeout(res, 500));
    }
    console.log(`round ${r + 1}: ${line.join(', ')}`);
  }
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  console.log(Object.entries(results).map(([k, v]) => `${k} median ${median(v).toFixed(0)} µs/poll`).join(', '));
  await red.stop();
  await server.exit();
  process.exit(0);
}

void main();
