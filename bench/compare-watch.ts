/**
 * Two builds' watch node side by side (`compare-builds.js <other dist> --watch`):
 * CPU per poll of charging-progress in watch mode (memory store), each build
 * in a process of its own running that build's bench/contender.js (a real
 * Node-RED with that build's nodes installed), all polling at the same time
 * against one bench server, tokens of their own letter each (counted apart
 * at the server). A second process of this build beside them is the A/A: what
 * the method itself reads between two seats of the same code.
 *
 * Every window is opened and closed for all three together; each process
 * measures its own CPU less its idle CPU (nothing watched). Ratios within
 * each window, median [min–max] over the windows.
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import type { ContenderCommand } from './contender';
import { ChildCalls } from './ipc';
import { median, spread } from './measure';
import type { BenchServer } from './server';

const INTERVAL_SEC = 10;
/** every token polled once before a window (its first poll's `started`, the watch list kept) */
const SETTLE_MS = (INTERVAL_SEC + 2) * 1000;
const WINDOW_MS = 20_000;
/** polling before the first window, so that each process has compiled its build's code */
const WARMUP_MS = 40_000;

interface Seat {
  role: 'before' | 'after' | 'afterB';
  dist: string;
  prefix: string;
}

export interface WatchComparison {
  server: BenchServer;
  /** this build's dist and the other's */
  ours: string;
  other: string;
  /** windows */
  rounds: number;
  /** tokens each watch node polls (default 1 000: 100 polls a second each) */
  tokens?: number;
}

async function contender(server: BenchServer, dist: string): Promise<ChildCalls<ContenderCommand>> {
  const c = new ChildCalls<ContenderCommand>(fork(path.join(dist, 'bench', 'contender.js'), { execArgv: ['--expose-gc'] }));
  await c.call({ cmd: 'init', base: server.base, intervalSec: INTERVAL_SEC });
  return c;
}

/** The watch comparison's table, as markdown lines. */
export async function compareWatch({ server, ours, other, rounds, tokens = 1000 }: WatchComparison): Promise<string> {
  const seats: Seat[] = [
    { role: 'before', dist: other, prefix: 'P' },
    { role: 'after', dist: ours, prefix: 'Q' },
    { role: 'afterB', dist: ours, prefix: 'R' },
  ];
  const procs = await Promise.all(seats.map((s) => contender(server, s.dist)));
  const all = (m: ContenderCommand) => Promise.all(procs.map((p) => p.call(m)));
  const startAll = () => Promise.all(procs.map((p, i) => p.call({ cmd: 'start', kind: 'mem', n: tokens, prefix: seats[i].prefix })));
  const window = async (ms: number) => {
    const g0 = await server.getsBy();
    await all({ cmd: 'begin' });
    await new Promise((r) => setTimeout(r, ms));
    const ends = await all({ cmd: 'end' });
    const g1 = await server.getsBy();
    return { cpuMs: ends.map((e) => e.cpuMs), polls: seats.map((s) => (g1[s.prefix] ?? 0) - (g0[s.prefix] ?? 0)) };
  };
  // Idle: the flow deployed, nothing watched; CPU per second of each process, subtracted from its windows.
  const idle: number[][] = [];
  for (let q = 0; q < 3; q++) idle.push((await window(5000)).cpuMs.map((ms) => ms / 5));
  const idlePerSec = seats.map((_, i) => median(idle.map((w) => w[i])));
  await startAll();
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  await all({ cmd: 'stop' });
  const perPoll: number[][] = seats.map(() => []);
  for (let w = 0; w < rounds; w++) {
    await startAll();
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const got = await window(WINDOW_MS);
    await all({ cmd: 'stop' });
    seats.forEach((_, i) => perPoll[i].push(((got.cpuMs[i] - (idlePerSec[i] * WINDOW_MS) / 1000) * 1000) / Math.max(1, got.polls[i])));
    console.log(`watch window ${w + 1}: ${seats.map((s, i) => `${s.role} ${perPoll[i][w].toFixed(0)} µs/poll (${got.polls[i]} polls)`).join(', ')}`);
  }
  await Promise.all(procs.map((p) => p.exit()));
  const ratio = (a: number, b: number) => perPoll[a].map((x, w) => x / perPoll[b][w]);
  return [
    `### CPU per poll of a watch node (memory store), ${tokens} tokens at ${INTERVAL_SEC} s, every poll an event; ${rounds} windows of ${WINDOW_MS / 1000} s`,
    '',
    `before = ${other}, after = ${ours} (twice: after and afterB, the A/A). Idle CPU subtracted (${idlePerSec.map((x) => x.toFixed(1)).join(' / ')} ms/s).`,
    '',
    '| before µs/poll | after µs/poll | afterB µs/poll | after/before | afterB/after (A/A) |',
    '|---|---|---|---|---|',
    `| ${median(perPoll[0]).toFixed(0)} | ${median(perPoll[1]).toFixed(0)} | ${median(perPoll[2]).toFixed(0)} | ${spread(ratio(1, 0))} | ${spread(ratio(2, 1))} |`,
  ].join('\n');
}
