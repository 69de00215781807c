/**
 * Several real Node-RED processes (`node red.js`) running the same flows
 * against one simulator and one Redis, as replicas of one deployment (issue 35,
 * docs/fleet.md "Tests").
 *
 * What each replica's flow emits is written to its log by recorder function
 * nodes (`OUT {json}` lines, see recorder()), so a test reads the union of the
 * replicas' outputs, including those of a replica killed since. Each replica
 * sends its own marker in a request header (the configuration's API key,
 * header `x-replica`: a credential, so each user dir has its own), so that the
 * simulator tells which replica sent every request it recorded.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { ChargingServiceSimulator, RecordedRequest } from '../simulator/simulator';
import { SESSIONS_PATH } from '../simulator/simulator';
import { RedProcess } from './red-process';
import { until, type FlowNode } from './harness';

/** The header each replica marks its service requests with. */
export const REPLICA_HEADER = 'x-replica';

/** Replica i's marker: long enough that the redactor, which hides it as a secret, hides nothing else. */
export const replicaMarker = (i: number): string => `replica-${i}-marker`;

/** settings.js of every replica: quick cycles and leases, and a low poll floor. */
export const FAST_FLEET = { cycleMs: 200, leaseMs: 800 };

/** How long a replica sees a healthy peer before it stands down at FAST_FLEET's cycle (fleet.ts: max(3 s, 2 cycles)). */
export const STAND_DOWN_CONFIRM_MS = Math.max(3_000, 2 * FAST_FLEET.cycleMs);

/** One recorded output of a replica's flow. */
export interface Output {
  /** which replica (index) emitted it */
  replica: number;
  /** the recorder node's name */
  n: string;
  /** Date.now() in the replica */
  at: number;
  topic?: string;
  event?: string;
  fleet?: { role?: string; sentBy?: string; replica?: string };
  statusCode?: number;
  /** msg.payload when it is a string (charging-control's state) */
  state?: string;
  /** the record's (or the ended session's) transaction */
  tx?: string;
  /** the record's meterEnd */
  meter?: number;
  error?: { message?: string; code?: string; source?: { id?: string } };
}

/** A service request at the simulator and who sent it. */
export interface Arrival {
  at: number;
  method: string;
  token: string;
  /** replica index, -1 for the test's own client */
  replica: number;
}

/**
 * A function node that logs what a test needs of each message it gets as one
 * `OUT {json}` line (node.log: one line on the console): the topic, event,
 * msg.fleet, status code, the transaction and meter of a record, an error.
 */
export function recorder(id: string, x = 700, y = 100): FlowNode {
  const func = `const e = msg.error;
const td = msg.payload && msg.payload.transactionData;
node.log('OUT ' + JSON.stringify({ n: node.name, at: Date.now(), topic: msg.topic, event: msg.event, fleet: msg.fleet, statusCode: msg.statusCode, state: typeof msg.payload === 'string' ? msg.payload : undefined,
  tx: (td && td.transactionId) || (msg.session && msg.session.transactionId) || undefined, meter: td ? td.meterEnd : undefined,
  error: e && { message: e.message, code: e.code, source: e.source && { id: e.source.id } } }));
return null;`;
  return { id, type: 'function', z: 'tab', name: id, func, outputs: 1, x, y, wires: [[]] };
}

export class Replicas {
  /** what each replica logged before its last restart */
  private readonly history: string[];

  private constructor(readonly procs: RedProcess[]) {
    this.history = procs.map(() => '');
  }

  /**
   * n user dirs with the same flow and settings, each with `credentials` plus
   * its own marker as the API key of every configuration listed in `marked`.
   */
  static async prepare(n: number, flow: FlowNode[], settings: string, credentials: Record<string, Record<string, unknown>>, marked: string[]): Promise<Replicas> {
    const procs: RedProcess[] = [];
    for (let i = 0; i < n; i++) {
      const creds: Record<string, Record<string, unknown>> = { ...credentials };
      for (const id of marked) creds[id] = { ...creds[id], apiKey: replicaMarker(i) };
      procs.push(await RedProcess.prepare(`charging-replica-${i}-`, flow, settings, creds));
    }
    return new Replicas(procs);
  }

  /** Starts every replica at once and waits until all run their flows. */
  async startAll(): Promise<void> {
    await Promise.all(this.procs.map((_, i) => this.start(i)));
  }

  /** Starts (or restarts) replica i, keeping what it logged before. */
  async start(i: number): Promise<void> {
    this.history[i] += this.procs[i].log;
    await this.procs[i].start();
  }

  /** kill -9 of replica i. */
  async kill(i: number): Promise<void> {
    await this.procs[i].stop('SIGKILL');
  }

  async remove(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.remove()));
  }

  /** Everything replica i logged since the suite began. */
  log(i: number): string {
    return this.history[i] + this.procs[i].log;
  }

  /** The union of the replicas' outputs (optionally of one recorder), in the order of their clocks. */
  outputs(recorderName?: string): Output[] {
    const all: Output[] = [];
    this.procs.forEach((_, i) => {
      // Only whole lines: the last one may still be on its way through the pipe.
      const lines = this.log(i).split('\n').slice(0, -1);
      for (const line of lines) {
        const m = / OUT (\{.*\})\s*$/.exec(line);
        if (!m) continue;
        const o = { ...(JSON.parse(m[1]) as Omit<Output, 'replica'>), replica: i };
        if (!recorderName || o.n === recorderName) all.push(o);
      }
    });
    return all.sort((a, b) => a.at - b.at);
  }

  /** POST /inject/<id> on replica i, with the given message properties (Node-RED's inject button, as the editor sends it). */
  async inject(i: number, nodeId: string, props: Array<{ p: string; v: string; vt?: string }> = []): Promise<void> {
    const body = props.length > 0 ? JSON.stringify({ __user_inject_props__: props }) : '{}';
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: this.procs[i].port, path: `/inject/${nodeId}`, method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(status, 200, `inject ${nodeId} on replica ${i}`);
  }

  /** Waits until the recorder named has at least n outputs in the union. */
  async outputsOf(recorderName: string, n: number, timeoutMs: number): Promise<Output[]> {
    await until(() => this.outputs(recorderName).length >= n, `${n} outputs at ${recorderName} (got ${this.outputs(recorderName).length})`, timeoutMs);
    return this.outputs(recorderName);
  }
}

/** Service requests (token requests aside) recorded by the simulator from index `from` on, with the replica that sent each. */
export function arrivals(sim: ChargingServiceSimulator, from = 0, method?: 'GET' | 'POST'): Arrival[] {
  return sim.requests
    .slice(from)
    .filter((r) => r.path === SESSIONS_PATH && (!method || r.method === method))
    .map((r) => ({ at: r.at, method: r.method, token: tokenOf(r), replica: replicaOf(r) }));
}

function tokenOf(r: RecordedRequest): string {
  if (r.method === 'GET') return r.query.token ?? '';
  try {
    return String((JSON.parse(r.body) as { token?: unknown }).token ?? '');
  } catch {
    return '';
  }
}

function replicaOf(r: RecordedRequest): number {
  const m = /^replica-(\d+)-marker$/.exec(String(r.headers[REPLICA_HEADER] ?? ''));
  return m ? Number(m[1]) : -1;
}

/** The most of these arrival times within any 1 s window. */
export function busiestSecondOf(times: number[]): number {
  const at = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** Polls grouped by token, each list in time order. */
export function pollsByToken(polls: Arrival[]): Map<string, Arrival[]> {
  const by = new Map<string, Arrival[]>();
  for (const p of polls) {
    const list = by.get(p.token) ?? [];
    list.push(p);
    by.set(p.token, list);
  }
  for (const list of by.values()) list.sort((a, b) => a.at - b.at);
  return by;
}

/**
 * How long two replicas polled one token at the same time, as the simulator
 * saw it. Each replica's polls of a token are cut into runs wherever two of
 * them are more than `gapMs` apart (it stopped, and maybe took the token back
 * later); the answer is the longest overlap of two runs of different replicas
 * (negative: one after the other). Polls lie inside the time a replica really
 * polled, so this never overstates it; a clean hand-over (A's polls, then B's)
 * and a hand-back (A, B, A) overlap nowhere.
 */
export function longestDoublePolling(polls: Arrival[], gapMs: number): { token: string; ms: number; replicas: number[] } {
  let worst = { token: '', ms: -Infinity, replicas: [] as number[] };
  for (const [token, list] of pollsByToken(polls)) {
    const runs: Array<{ replica: number; first: number; last: number }> = [];
    const open = new Map<number, { replica: number; first: number; last: number }>();
    for (const p of list) {
      const run = open.get(p.replica);
      if (run && p.at - run.last <= gapMs) {
        run.last = p.at;
      } else {
        const fresh = { replica: p.replica, first: p.at, last: p.at };
        runs.push(fresh);
        open.set(p.replica, fresh);
      }
    }
    for (let a = 0; a < runs.length; a++) {
      for (let b = a + 1; b < runs.length; b++) {
        if (runs[a].replica === runs[b].replica) continue;
        const ms = Math.min(runs[a].last, runs[b].last) - Math.max(runs[a].first, runs[b].first);
        if (ms > worst.ms) worst = { token, ms, replicas: [runs[a].replica, runs[b].replica] };
      }
    }
  }
  return worst;
}

/** The longest time between two polls of the same token (whoever polled), and which token. */
export function longestGap(polls: Arrival[], tokens: string[], from: number, to: number): { token: string; ms: number } {
  const by = pollsByToken(polls);
  let worst = { token: '', ms: 0 };
  for (const t of tokens) {
    const at = [from, ...(by.get(t) ?? []).map((p) => p.at).filter((x) => x >= from && x <= to), to];
    for (let i = 1; i < at.length; i++) if (at[i] - at[i - 1] > worst.ms) worst = { token: t, ms: at[i] - at[i - 1] };
  }
  return worst;
}
