/**
 * A focused profile of watch mode (#19.1): one watch node polling N tokens at
 * a 10 s interval against the bench server, nothing else. Run under
 * `node --cpu-prof dist/bench/watch-profile.js [N] [seconds] [store]`.
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';
import { EmbeddedNodeRed } from './runtime';

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 1000);
  const seconds = Number(process.argv[3] ?? 15);
  const store = process.argv[4] ?? '';
  const server = fork(path.join(__dirname, 'server.js'));
  const port = await new Promise<number>((resolve) => server.once('message', (m: { port: number }) => resolve(m.port)));
  const base = `http://127.0.0.1:${port}`;
  const red = await EmbeddedNodeRed.start({ chargingSession: { minPollIntervalSec: 1 }, contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } } });
  let events = 0;
  red.onSink(() => events++);
  await red.deploy([
    { id: 'tab', type: 'tab', label: 'watch' },
    { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: 10, contextStore: store, wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ]);
  red.node('w').receive({ topic: 'watch', payload: Array.from({ length: n }, (_, i) => `W${i}`) });
  // Profile only the steady state (after the first round), in this process, when asked.
  await new Promise((r) => setTimeout(r, 2000));
  const session = process.env.WATCH_PROFILE ? new inspector.Session() : null;
  const post = (method: string, params?: object) => new Promise<unknown>((res, rej) => session?.post(method, params ?? {}, (err, out) => (err ? rej(err) : res(out))));
  if (session) {
    session.connect();
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 100 });
    await post('Profiler.start');
  }
  const e0 = events;
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  events -= e0;
  if (session) {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    fs.writeFileSync(process.env.WATCH_PROFILE as string, JSON.stringify(profile));
  }
  console.log(`${events} events, ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU, ${((cpu.user + cpu.system) / Math.max(1, events)).toFixed(0)} µs/event`);
  await red.stop();
  server.kill();
  process.exit(0);
}

void main();
