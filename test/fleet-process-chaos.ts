/**
 * The nemesis over real Node-RED processes (docs/fleet.md "The nemesis over
 * processes"): one simulator, one redis-server without persistence, and three
 * `node red.js` replicas with the same flows, each reaching Redis through its
 * own nemesis proxy. A seeded schedule runs three things at once:
 *
 * - faults, one at a time, each healed before the next: replies withheld then
 *   the connection reset, a black hole, a reset (one replica's proxy each);
 *   `CLIENT PAUSE 2500 WRITE`; Redis restarted WITHOUT its data; SIGSTOP of a
 *   replica for longer than its lease, then SIGCONT; kill -9 of a replica and
 *   its restart. Every seed has each kind at least once, in a seeded order;
 * - START and STOP injected on every replica at once (the editor's inject
 *   button through the admin API), on their own tokens;
 * - sessions started and stopped at the simulator by the test itself (a
 *   driver at the station) on the tokens the watch node watches.
 *
 * Nothing is asked of the replicas: the invariants are checked from outside
 * (fleet-process-invariants.ts), at the simulator's door and in the union of
 * the flows' outputs. Used by test/nodes/fleet-process-chaos.test.ts (two
 * short seeds) and `npm run soak -- --fleet --processes` (twenty).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ServiceClient } from '../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../simulator/simulator';
import { seeded } from './fleet-chaos';
import { checkInvariants, type CommandInjected, type Outage, type WatchSession } from './fleet-process-invariants';
import { FAST_FLEET, recorder, REPLICA_HEADER, Replicas } from './fleet-replicas';
import { CLIENT_ID, CLIENT_SECRET, clientFor, delay, startSimulator, type FlowNode } from './harness';
import { pauseWrites, RedisNemesis } from './redis-nemesis';
import { RedisServer } from './redis-server';

export const REDIS_PASSWORD = 'Nemesis-Redis-Pa55word';
const N = 3;
/** the watch node's interval and the fleet's request budget: the watch alone asks more than the budget allows */
export const INTERVAL_MS = 1000;
export const BUDGET_PER_SEC = 8;
const WATCHED = 10;
const COMMAND_TOKENS = 4;
/** a session the driver starts lasts at least this long, and a connector rests this long between two: longer than any time a token may go unpolled */
const SESSION_MS = 9000;
const REST_MS = 4000;
/** an injected command's token rests this long before the next command on it */
const COMMAND_REST_MS = 4000;

export type FaultKind = 'lost-reply' | 'blackhole' | 'reset' | 'pause' | 'redis-restart' | 'sigstop' | 'kill';
export const FAULT_KINDS: FaultKind[] = ['lost-reply', 'blackhole', 'reset', 'pause', 'redis-restart', 'sigstop', 'kill'];

export interface ProcessChaosOptions {
  seed: number;
  /** faults go on at least this long (each kind at least once, whatever this says) */
  seconds: number;
  /** a line of progress, for the soak */
  say?: (line: string) => void;
}

export interface ProcessChaosReport {
  seed: number;
  violations: string[];
  /** what was done when, ms from the schedule's start */
  schedule: string[];
  figures: Record<string, number>;
}

function flowFor(sim: ChargingServiceSimulator): FlowNode[] {
  const inject = (id: string, y: number, wire: string, topic = '') => ({ id, type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic, payload: '{}', payloadType: 'json', repeat: '', once: false, x: 100, y, wires: [[wire]] });
  return [
    { id: 'tab', type: 'tab', label: 'nemesis' },
    { id: 'svc', type: 'charging-service', name: 'chaos', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 10, maxInFlight: 8, maxRequestsPerSec: BUDGET_PER_SEC, apiKeyHeader: REPLICA_HEADER, fleetKey: 'nemesis' },
    inject('start-in', 100, 'start'),
    { id: 'start', type: 'charging-start', z: 'tab', service: 'svc', x: 400, y: 100, wires: [['recS']] },
    inject('stop-in', 200, 'stop'),
    { id: 'stop', type: 'charging-stop', z: 'tab', service: 'svc', x: 400, y: 200, wires: [['recT']] },
    inject('watch-in', 300, 'w', 'watch'),
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, x: 400, y: 300, wires: [['recW']] },
    { id: 'catch', type: 'catch', z: 'tab', scope: null, uncaught: false, x: 100, y: 400, wires: [['recE']] },
    recorder('recS', 700, 100),
    recorder('recT', 700, 200),
    recorder('recW', 700, 300),
    recorder('recE', 700, 400),
  ];
}

interface Fault {
  kind: FaultKind;
  replica: number;
  ms: number;
  /** pause before the next fault */
  restMs: number;
}

/** The seed's faults: every kind once in a seeded order, then more at random until `seconds` are filled. */
export function planFaults(seed: number, seconds: number): Fault[] {
  const rnd = seeded(seed * 7919 + 1);
  const kinds = [...FAULT_KINDS];
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j], kinds[i]];
  }
  const faults: Fault[] = [];
  let total = 0;
  for (let k = 0; k < kinds.length || total < seconds * 1000; k++) {
    const kind = k < kinds.length ? kinds[k] : FAULT_KINDS[Math.floor(rnd() * FAULT_KINDS.length)];
    const ms = kind === 'lost-reply' ? 200 + rnd() * 800 : kind === 'blackhole' ? 500 + rnd() * 3000 : kind === 'pause' ? 2500 : kind === 'sigstop' ? FAST_FLEET.leaseMs + 200 + rnd() * 2000 : 0;
    const f = { kind, replica: Math.floor(rnd() * N), ms: Math.round(ms), restMs: Math.round(800 + rnd() * 1200) };
    faults.push(f);
    total += f.ms + f.restMs + (kind === 'kill' ? 3000 : 0);
  }
  return faults;
}

/** Replica i reaches Redis through its own proxy: its configuration's coordination URL says so. */
function routeThrough(replicas: Replicas, i: number, url: string): void {
  const file = path.join(replicas.procs[i].dataDir, 'flows_cred.json');
  const creds = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, Record<string, unknown>>;
  creds.svc = { ...creds.svc, coordination: url };
  fs.writeFileSync(file, JSON.stringify(creds));
}

class Run {
  readonly schedule: string[] = [];
  readonly outages: Outage[] = [];
  readonly commands: CommandInjected[] = [];
  readonly sessions: WatchSession[] = [];
  /** replicas that can take an inject now: running and not stopped */
  readonly live = new Set<number>([0, 1, 2]);
  readonly restarts = new Set<Promise<void>>();
  readonly t0 = Date.now();
  private client: ServiceClient;

  constructor(
    readonly sim: ChargingServiceSimulator,
    readonly redis: RedisServer,
    readonly nemeses: RedisNemesis[],
    readonly replicas: Replicas,
    private readonly say: (line: string) => void,
  ) {
    this.client = clientFor(sim, { timeoutMs: 5000 });
  }

  note(what: string): void {
    const line = `${String(Date.now() - this.t0).padStart(6)} ms ${what}`;
    this.schedule.push(line);
    this.say(line);
  }

  async fault(f: Fault): Promise<void> {
    const at = Date.now();
    const i = f.replica;
    this.note(`${f.kind}${['lost-reply', 'blackhole', 'reset', 'sigstop', 'kill'].includes(f.kind) ? ` replica ${i}` : ''}${f.ms ? ` ${f.ms} ms` : ''}`);
    switch (f.kind) {
      case 'lost-reply':
      case 'blackhole':
        if (f.kind === 'lost-reply') this.nemeses[i].withhold();
        else this.nemeses[i].blackhole();
        await delay(f.ms);
        this.nemeses[i].heal();
        this.outages.push({ kind: 'cut', replica: i, from: at, to: Date.now() });
        break;
      case 'reset':
        this.nemeses[i].reset();
        this.outages.push({ kind: 'cut', replica: i, from: at, to: Date.now() });
        break;
      case 'pause':
        await pauseWrites(this.redis.url, f.ms).catch((e: Error) => this.note(`pause failed: ${e.message}`));
        await delay(f.ms);
        this.outages.push({ kind: 'pause', from: at, to: Date.now() });
        break;
      case 'redis-restart':
        await this.redis.stop();
        await this.redis.start();
        this.outages.push({ kind: 'data-loss', from: at, to: Date.now() });
        break;
      case 'sigstop':
        await this.sigstop(i, f.ms);
        break;
      case 'kill':
        await this.killAndRestart(i);
        break;
    }
  }

  private async sigstop(i: number, ms: number): Promise<void> {
    const pid = this.replicas.procs[i].pid;
    if (pid === null || !this.live.has(i)) return this.note(`(replica ${i} is down: no SIGSTOP)`);
    this.live.delete(i);
    process.kill(pid, 'SIGSTOP');
    const from = Date.now();
    try {
      await delay(ms);
    } finally {
      process.kill(pid, 'SIGCONT');
      this.outages.push({ kind: 'stopped', replica: i, from, to: Date.now() });
      this.live.add(i);
    }
  }

  private async killAndRestart(i: number): Promise<void> {
    if (!this.live.has(i)) return this.note(`(replica ${i} is down: no kill)`);
    this.live.delete(i);
    const from = Date.now();
    await this.replicas.kill(i);
    const back = (async () => {
      await delay(500);
      await this.replicas.start(i);
      this.outages.push({ kind: 'killed', replica: i, from, to: Date.now() });
      this.note(`replica ${i} back`);
      this.live.add(i);
    })();
    this.restarts.add(back);
    void back.finally(() => this.restarts.delete(back));
  }

  /** START on a token without a session, STOP of its session otherwise; on every replica that can take it, at once. */
  async inject(token: string, seq: number): Promise<void> {
    const live = this.sim.session(token);
    const targets = [...this.live];
    if (targets.length === 0) return;
    const cmd = live ? { locationId: 'LOC-N', evseId: live.evseId, token, transactionId: live.transactionId } : { locationId: 'LOC-N', evseId: `E${seq}`, token };
    const action = live ? 'STOP' : 'START';
    const key = live ? live.transactionId : `${token}|LOC-N|E${seq}`;
    this.commands.push({ action, key, at: Date.now(), targets });
    this.note(`inject ${action} ${key} on ${targets.join(',')}`);
    const node = live ? 'stop-in' : 'start-in';
    await Promise.all(targets.map((i) => this.replicas.inject(i, node, [{ p: 'payload', v: JSON.stringify(cmd), vt: 'json' }]).catch((e: Error) => this.note(`inject on ${i} failed: ${e.message}`))));
  }

  /** The driver at the station: a session begins (no session) or ends (one old enough). */
  async drive(token: string): Promise<void> {
    const s = this.sessions.filter((x) => x.token === token).at(-1);
    const now = Date.now();
    if (!s || (s.stoppedAt !== null && now - s.stoppedAt >= REST_MS)) {
      await this.client.sendCommand({ action: 'START', locationId: 'LOC-W', evseId: token, token });
      const started = this.sim.session(token);
      if (started) this.sessions.push({ token, tx: started.transactionId, startedAt: now, stoppedAt: null });
    } else if (s.stoppedAt === null && now - s.startedAt >= SESSION_MS) {
      await this.client.sendCommand({ action: 'STOP', locationId: 'LOC-W', evseId: token, token, transactionId: s.tx });
      s.stoppedAt = Date.now();
    }
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** One seeded schedule from a clean start to its verdict; everything it started is stopped before it returns. */
export async function runProcessChaos(options: ProcessChaosOptions): Promise<ProcessChaosReport> {
  const say = options.say ?? (() => undefined);
  const rnd = seeded(options.seed);
  const faults = planFaults(options.seed, options.seconds);
  const watched = Array.from({ length: WATCHED }, (_, i) => `NW-${i}`);
  const commandTokens = Array.from({ length: COMMAND_TOKENS }, (_, i) => `NC-${i}`);
  const sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 500_000 });
  const redis = await RedisServer.start({ password: REDIS_PASSWORD, persist: false });
  const nemeses: RedisNemesis[] = [];
  let replicas: Replicas | null = null;
  let run: Run | null = null;
  try {
    for (let i = 0; i < N; i++) nemeses.push(await RedisNemesis.start(redis.port));
    const settings = `    chargingSession: { minPollIntervalSec: 0.2, fleet: { cycleMs: ${FAST_FLEET.cycleMs}, leaseMs: ${FAST_FLEET.leaseMs} } },`;
    replicas = await Replicas.prepare(N, flowFor(sim), settings, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } }, ['svc']);
    for (let i = 0; i < N; i++) routeThrough(replicas, i, nemeses[i].urlFor(redis.url));
    await replicas.startAll();
    const r = (run = new Run(sim, redis, nemeses, replicas, say));
    await Promise.all([0, 1, 2].map((i) => (replicas as Replicas).inject(i, 'watch-in', [{ p: 'payload', v: JSON.stringify(watched), vt: 'json' }, { p: 'topic', v: 'watch', vt: 'str' }])));
    r.note(`seed ${options.seed}: watching ${watched.length} tokens on 3 replicas`);
    let faulting = true;
    const faultLoop = (async () => {
      await delay(1500);
      for (const f of faults) {
        await r.fault(f);
        await delay(f.restMs);
      }
      faulting = false;
    })();
    const commandRest = new Map<string, number>();
    let seq = 0;
    while (faulting) {
      const roll = rnd();
      const token = roll < 0.5 ? commandTokens[Math.floor(rnd() * commandTokens.length)] : watched[Math.floor(rnd() * watched.length)];
      if (roll < 0.5 && (commandRest.get(token) ?? 0) <= Date.now()) {
        commandRest.set(token, Date.now() + COMMAND_REST_MS);
        void r.inject(token, ++seq);
      } else if (roll >= 0.5) await r.drive(token).catch((e: Error) => r.note(`driver: ${e.message}`));
      await delay(200 + rnd() * 500);
    }
    await faultLoop;
    for (const n of nemeses) n.heal();
    await Promise.all([...r.restarts]);
    r.note('healed; settling');
    const endedAt = await settle(r);
    const report = checkInvariants({
      sim,
      replicas,
      commands: r.commands,
      sessions: r.sessions,
      outages: r.outages,
      watched,
      from: r.t0,
      to: endedAt,
      secrets: [CLIENT_SECRET, REDIS_PASSWORD],
      budgetPerSec: BUDGET_PER_SEC,
      intervalMs: INTERVAL_MS,
    });
    if (report.violations.length > 0 && process.env.NEMESIS_LOGS) keepLogs(process.env.NEMESIS_LOGS, options.seed, replicas, sim, r.t0);
    return { seed: options.seed, violations: report.violations, schedule: r.schedule, figures: report.figures };
  } finally {
    for (const n of nemeses) n.heal();
    if (run) await Promise.allSettled([...run.restarts]);
    await run?.close();
    await replicas?.remove();
    for (const n of nemeses) await n.close();
    await redis.close();
    await sim.stop();
  }
}

/** A failing seed's evidence for a human (NEMESIS_LOGS=<dir>): each replica's log and the service's requests, times from the schedule's start. */
function keepLogs(dir: string, seed: number, replicas: Replicas, sim: ChargingServiceSimulator, t0: number): void {
  fs.mkdirSync(dir, { recursive: true });
  replicas.procs.forEach((_, i) => fs.writeFileSync(path.join(dir, `seed-${seed}-replica-${i}.log`), replicas.log(i)));
  const lines = sim.requests.map((q) => `${q.at - t0} ${String(q.headers['x-replica'] ?? '-')} ${q.method} ${q.path} ${JSON.stringify(q.query)}${q.method === 'POST' ? ` ${q.body}` : ''}`);
  fs.writeFileSync(path.join(dir, `seed-${seed}-requests.log`), `${lines.join('\n')}\n`);
}

/** After the faults: every session's started (and ended, if stopped) in the outputs, within 12 s; then a few more polls. */
async function settle(r: Run): Promise<number> {
  const end = Date.now() + 12_000;
  const seen = () => {
    const outs = r.replicas.outputs('recW');
    return r.sessions.every((s) => outs.some((o) => o.event === 'started' && o.tx === s.tx) && (s.stoppedAt === null || outs.some((o) => o.event === 'ended' && o.tx === s.tx)));
  };
  while (!seen() && Date.now() < end) await delay(250);
  await delay(2 * INTERVAL_MS);
  return Date.now();
}
