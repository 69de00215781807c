/**
 * One contender of the side-by-side watch measurement (`npm run bench -- --watch`),
 * in a process of its own: a real Node-RED with the watch flow deployed, polling
 * the parent's bench server when told to, and measuring its own CPU over windows
 * the parent opens and closes for every contender at the same moment.
 *
 * Why processes side by side rather than one contender after another: at 100
 * tokens a poll costs under a millisecond of CPU, and this shared machine's speed
 * drifts by more than our whole difference within minutes (bare axios measured
 * 690 and 1 287 µs per poll in two windows five minutes apart). Contenders
 * measured over the same seconds meet the same drift. Two processes running the
 * same bare axios side by side (the parent's A/A column) agreed within 2.5 % per
 * window where one after another they spread 0.87-1.47.
 *
 *   fork('contender.js', { execArgv: ['--expose-gc'] }), then IPC: {id, cmd, ...} -> {id, ...}
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { barePolling, messagePolling } from './floor';
import { EmbeddedNodeRed, watchFlow } from './runtime';
import { serve } from './ipc';
import type { ChargingServiceNode } from '../nodes/common/service-node';
import { progressPoll } from '../nodes/common/watch-mode';
import { SessionWatcher, WatchEvent } from '../nodes/lib/session/watcher';
import type { NodeMessage } from 'node-red';

/**
 * mem, file: our watch node with each store; bare: the floor; nodered: bare axios
 * plus one Node-RED message per poll. Two more, to split our node into layers
 * (BENCH_WATCH_SEATS in watch-bench.ts): clientmsg, the deployed configuration's
 * ServiceClient on bare's schedule with each record sent on as one message
 * (our request pipeline and nothing else of watch mode); watchermsg, a
 * SessionWatcher over that client, each event sent on as the node's message
 * would be (no kept state, no badge, no node lifecycle).
 */
export const CONTENDER_KINDS = ['mem', 'file', 'bare', 'nodered', 'clientmsg', 'watchermsg'] as const;
export type ContenderKind = (typeof CONTENDER_KINDS)[number];

export type ContenderCommand =
  | { cmd: 'init'; base: string; intervalSec: number }
  | { cmd: 'start'; kind: ContenderKind; n: number; prefix: string }
  | { cmd: 'begin' }
  | { cmd: 'end' }
  | { cmd: 'heap' }
  | { cmd: 'loop'; ms: number }
  | { cmd: 'stop' }
  | { cmd: 'exit' };

let red: EmbeddedNodeRed | null = null;
/** The tokens a contender polls: its own prefix, so that the server counts each contender's polls apart. */
const tokensOf = (m: { n: number; prefix: string }): string[] => Array.from({ length: m.n }, (_, i) => `${m.prefix}${i}`);
let base = '';
let cpu0: NodeJS.CpuUsage | null = null;
let running: { stop(): Promise<void> } | null = null;

const WATCH_NODE: Record<'mem' | 'file', string> = { mem: 'w-mem', file: 'w-file' };

async function handle(m: ContenderCommand): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case 'init': {
      base = m.base;
      red = await EmbeddedNodeRed.start({ contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } } });
      red.onSink(() => undefined);
      // The same flow in every contender's process, so that each runs beside the same Node-RED heap.
      await red.deploy(watchFlow(base, m.intervalSec));
      return {};
    }
    case 'start': {
      if (m.kind === 'bare') {
        const bare = barePolling(base, m.n, 10_000, undefined, m.prefix);
        running = { stop: async () => bare.stop() };
      } else if (m.kind === 'nodered') {
        // Bare axios, and each record passed on as one Node-RED message from a minimal node to the same sink.
        const floor = red!.node('floor');
        const polling = messagePolling(base, m.n, 10_000, (msg) => floor.send(msg), m.prefix);
        running = { stop: async () => polling.stop() };
      } else if (m.kind === 'clientmsg' || m.kind === 'watchermsg') {
        const floor = red!.node('floor');
        const service = red!.node('svc') as unknown as ChargingServiceNode;
        const client = service.getClient();
        // Aborted on stop, as a watch node's signal is on close.
        const closing = new AbortController();
        const options = { signal: closing.signal, priority: 'poll' } as const;
        let stop: () => void;
        if (m.kind === 'clientmsg') {
          const polling = barePolling(base, m.n, 10_000, (i) => client.getProgress(`${m.prefix}${i}`, options).then((res) => floor.send({ topic: `${m.prefix}${i}`, payload: res.record })), m.prefix);
          stop = () => polling.stop();
        } else {
          // The message a watch node sends for an event (WatchMode.onEvent).
          const send = (e: WatchEvent) => floor.send({ topic: e.token, event: e.event, payload: e.record, session: e.session } as NodeMessage);
          const watcher = new SessionWatcher(progressPoll(client, options), { intervalMs: 10_000, derive: service.deriveOptions }, send, () => undefined);
          watcher.watch(tokensOf(m));
          stop = () => watcher.close();
        }
        running = {
          stop: async () => {
            stop();
            closing.abort();
          },
        };
      } else {
        const node = red!.node(WATCH_NODE[m.kind]);
        node.receive({ topic: 'watch', payload: tokensOf(m) });
        running = { stop: async () => node.receive({ topic: 'unwatch', payload: '*' }) };
      }
      return {};
    }
    case 'begin':
      cpu0 = process.cpuUsage();
      return {};
    case 'end': {
      const cpu = process.cpuUsage(cpu0 ?? undefined);
      return { cpuMs: (cpu.user + cpu.system) / 1000 };
    }
    case 'heap':
      global.gc?.();
      return { heap: process.memoryUsage().heapUsed };
    case 'loop': {
      // Outside the CPU windows: its 10 ms timer would wake the process 100 times a second.
      const loop = monitorEventLoopDelay({ resolution: 10 });
      loop.enable();
      await new Promise((r) => setTimeout(r, m.ms));
      loop.disable();
      return { p99: loop.percentile(99) / 1e6 };
    }
    case 'stop':
      await running?.stop();
      running = null;
      await new Promise((r) => setTimeout(r, 500)); // polls in flight end
      return {};
    case 'exit':
      await red?.stop();
      setImmediate(() => process.exit(0));
      return {};
  }
}

// Only in the forked contender: watch-bench.ts imports this file for CONTENDER_KINDS.
if (require.main === module) serve(handle);
