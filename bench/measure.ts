/**
 * How the bench measures and reports: a closed loop of messages with its
 * throughput, latency and CPU per message, and the figures over rounds
 * (median [min–max]).
 */
import type { Drive } from './floor';
import type { EmbeddedNodeRed } from './runtime';
import type { BenchServer } from './server';

export interface Sample {
  rps: number;
  p50: number;
  p99: number;
  /** CPU of this process (the runtime) per message, µs */
  cpuUs: number;
}
export const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
export const spread = (xs: number[], d = 2) => `${median(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}]`;

/** Microseconds per call of `op`, one after another, after `warmUp` calls (scripts loaded, JIT): median and 90th percentile. */
export async function timeEach(n: number, op: () => Promise<unknown>, warmUp = Math.min(200, n)): Promise<{ median: number; p90: number }> {
  for (let i = 0; i < warmUp; i++) await op();
  const us: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await op();
    us.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  us.sort((a, b) => a - b);
  return { median: pct(us, 50), p90: pct(us, 90) };
}

/** Keeps `conc` messages outstanding until `total` are answered. */
export async function closedLoop(total: number, conc: number, one: Drive): Promise<Sample> {
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

/** A message sent into a node of the deployed flow: `i` picks its token; resolves when it reaches the flow's sink. */
export type ThroughNode = (id: string, token?: (i: number) => string) => Drive;

/** What every section of `npm run bench` works with: the runtime in this process, the service in its own. */
export interface BenchContext {
  red: EmbeddedNodeRed;
  server: BenchServer;
  throughNode: ThroughNode;
}

/** Drives messages through nodes of `red`'s flows, each answered when it reaches a bench-sink (messages without a number pass by). */
export function messageDriver(red: EmbeddedNodeRed): ThroughNode {
  const waiting = new Map<number, () => void>();
  let seq = 0;
  red.onSink((msg) => {
    const n = msg._bench as number;
    const done = waiting.get(n);
    if (done) {
      waiting.delete(n);
      done();
    }
  });
  return (id, token = (i) => `T${i}`) => {
    const node = red.node(id);
    return (i) =>
      new Promise<void>((resolve) => {
        const n = ++seq;
        waiting.set(n, resolve);
        node.receive({ _bench: n, payload: { token: token(i) } });
      });
  };
}
