/**
 * The nemesis over real Node-RED processes (docs/fleet.md "The nemesis over
 * processes"): one simulator, Redis without persistence, and three `node
 * red.js` replicas with the same flows, each reaching the service through its
 * own HTTP proxy (HTTP_PROXY). Redis is one of two deployments:
 *
 * - 'single': one redis-server, each replica reaching it through its own
 *   nemesis proxy;
 * - 'sentinel': a primary, a replica and three sentinels
 *   (test/redis-sentinel.ts), the replicas configured with the
 *   redis-sentinel:// URL.
 *
 * A seeded schedule runs three things at once:
 *
 * - faults, one at a time, each healed before the next: replies withheld then
 *   the connection reset, a black hole, a reset (one replica's proxy each;
 *   single only); `CLIENT PAUSE 2500 WRITE`; Redis restarted WITHOUT its data
 *   (single only); SENTINEL FAILOVER and kill -9 of the primary (sentinel
 *   only); SIGSTOP of a replica for longer than its lease, then SIGCONT; kill
 *   -9 of a replica and its restart; one replica's egress answering 503,
 *   resetting or silent while its peers are fine; the service failing for
 *   everyone. Every seed has each kind of its deployment at least once, in a
 *   seeded order;
 * - START and STOP injected on every replica at once (the editor's inject
 *   button through the admin API), on their own tokens;
 * - sessions started and stopped at the simulator by the test itself (a
 *   driver at the station) on the tokens the watch node watches;
 * - a depot's connectors wanted on and off (fleet-process-depot.ts), on every
 *   replica at once.
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
import { checkDepot, DEPOT_TARGETS, depotFlow, injectWish, settleDepot, type Wish } from './fleet-process-depot';
import { checkInvariants, type CommandInjected, type Outage, type WatchSession } from './fleet-process-invariants';
import { BUDGET_PER_SEC, failMs, faultMs, INTERVAL_MS, N, planFaults, TIMEOUT_S, type Fault, type FaultKind, type Topology } from './fleet-process-faults';
import { FAST_FLEET, recorder, REPLICA_HEADER, Replicas } from './fleet-replicas';
import { CLIENT_ID, CLIENT_SECRET, clientFor, delay, startSimulator, type FlowNode } from './harness';
import { pauseWrites, RedisNemesis } from './redis-nemesis';
import { RedisServer } from './redis-server';
import type { RedisSentinel } from './redis-sentinel';
import { Deployment, REDIS_PASSWORD, routeThrough, SENTINEL_PASSWORD } from './fleet-process-redis';
import { TestProxy } from './proxy-server';

const WATCHED = 10;
const COMMAND_TOKENS = 4;
/**
 * A session the driver starts lasts at least this long, longer than any time
 * a token may go unpolled: a replica whose egress says nothing stands down
 * only after its queries time out (about 16 s, missMs), then a lease and two
 * cycles and two intervals pass before a peer polls its tokens.
 */
const SESSION_MS = 22_000;
const REST_MS = 4000;
/** an injected command's token rests this long before the next command on it */
const COMMAND_REST_MS = 4000;


export interface ProcessChaosOptions {
  seed: number;
  /** faults go on at least this long (each kind at least once, whatever this says) */
  seconds: number;
  /** the Redis deployment (default 'single') */
  redis?: Topology;
  /** these faults in this order instead of the seeded plan (replica 0 for a replica's fault, 2 s rest after each) */
  faults?: FaultKind[];
  /** plan from these kinds only (default: every kind of the deployment) */
  kinds?: FaultKind[];
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
    { id: 'svc', type: 'charging-service', name: 'chaos', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: TIMEOUT_S, maxInFlight: 8, maxRequestsPerSec: BUDGET_PER_SEC, apiKeyHeader: REPLICA_HEADER, fleetKey: 'nemesis' },
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
    ...depotFlow(sim, TIMEOUT_S),
  ];
}


class Run {
  readonly schedule: string[] = [];
  readonly outages: Outage[] = [];
  readonly commands: CommandInjected[] = [];
  readonly sessions: WatchSession[] = [];
  readonly wishes: Wish[] = [];
  /** replicas that can take an inject now: running and not stopped */
  readonly live = new Set<number>([0, 1, 2]);
  readonly restarts = new Set<Promise<void>>();
  readonly t0 = Date.now();
  private client: ServiceClient;

  constructor(
    readonly sim: ChargingServiceSimulator,
    readonly redis: Deployment,
    readonly nemeses: RedisNemesis[],
    readonly egress: TestProxy[],
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
    this.note(`${f.kind}${['lost-reply', 'blackhole', 'reset', 'sigstop', 'kill'].includes(f.kind) || f.kind.startsWith('egress') ? ` replica ${i}` : ''}${f.ms ? ` ${f.ms} ms` : ''}`);
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
        await this.redis.sentinel?.refresh();
        await pauseWrites(this.redis.primaryUrl, f.ms).catch((e: Error) => this.note(`pause failed: ${e.message}`));
        await delay(f.ms);
        this.outages.push({ kind: 'pause', from: at, to: Date.now() });
        break;
      case 'redis-restart':
        await (this.redis.single as RedisServer).stop();
        await (this.redis.single as RedisServer).start();
        this.outages.push({ kind: 'data-loss', from: at, to: Date.now() });
        break;
      case 'failover':
      case 'primary-kill':
        await this.failover(f.kind);
        break;
      case 'egress-503':
      case 'egress-reset':
      case 'egress-silent':
        this.egress[i].forwardMode = f.kind === 'egress-503' ? '503' : f.kind === 'egress-reset' ? 'reset' : 'silent';
        this.egress[i].dropConnections();
        await delay(f.ms);
        this.egress[i].forwardMode = 'normal';
        this.outages.push({ kind: 'egress', replica: i, from: at, to: Date.now(), failMs: failMs(f.kind) });
        break;
      case 'service-down':
        this.sim.inject({ target: 'get', kind: 'status', status: 503, body: '{"error":"unavailable"}', times: Infinity });
        await delay(f.ms);
        this.sim.clearFaults();
        this.outages.push({ kind: 'service-down', from: at, to: Date.now() });
        break;
      case 'sigstop':
        await this.sigstop(i, f.ms);
        break;
      case 'kill':
        await this.killAndRestart(i);
        break;
    }
  }

  /** SENTINEL FAILOVER, or kill -9 of the primary (back as a replica 0.5 s after the promotion): an outage until the promotion. */
  private async failover(kind: 'failover' | 'primary-kill'): Promise<void> {
    const s = this.redis.sentinel as RedisSentinel;
    try {
      const r = kind === 'failover' ? await s.failover() : await s.killPrimary();
      this.outages.push({ kind: 'failover', from: 'killedAt' in r ? r.killedAt : r.askedAt, to: r.switchedAt });
      this.note(`${kind}: ${r.from} -> ${r.to}, switched at ${r.switchedAt - this.t0} ms`);
      if (kind === 'primary-kill') {
        await delay(500);
        await s.restartStopped();
      }
    } catch (e) {
      this.note(`${kind} failed: ${(e as Error).message}`);
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

  /** A depot connector's wish turned over (off at first), on every replica that can take it. */
  async wish(token: string): Promise<void> {
    const on = !this.wishes.filter((w) => w.token === token).at(-1)?.on;
    this.note(await injectWish(this.replicas, [...this.live], this.wishes, token, on));
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
  const faults = options.faults ? options.faults.map((kind) => ({ kind, replica: 0, ms: Math.round(faultMs(kind, () => 0.5)), restMs: 2000 })) : planFaults(options.seed, options.seconds, options.redis, options.kinds);
  const watched = Array.from({ length: WATCHED }, (_, i) => `NW-${i}`);
  const commandTokens = Array.from({ length: COMMAND_TOKENS }, (_, i) => `NC-${i}`);
  const sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 500_000 });
  const topology = options.redis ?? 'single';
  const redis = await Deployment.start(topology);
  const nemeses: RedisNemesis[] = [];
  const egress: TestProxy[] = [];
  let replicas: Replicas | null = null;
  let run: Run | null = null;
  try {
    for (let i = 0; i < N; i++) {
      if (redis.single) nemeses.push(await RedisNemesis.start(redis.single.port));
      egress.push(await new TestProxy().start());
    }
    const settings = `    chargingSession: { minPollIntervalSec: 0.2, fleet: { cycleMs: ${FAST_FLEET.cycleMs}, leaseMs: ${FAST_FLEET.leaseMs} } },`;
    replicas = await Replicas.prepare(N, flowFor(sim), settings, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }, svcD: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } }, ['svc', 'svcD']);
    for (let i = 0; i < N; i++) {
      routeThrough(replicas, i, redis.urlFor(nemeses[i]));
      // Each replica's egress through its own proxy; on Sentinel, the fleet's trace says what a demoted primary acknowledged.
      replicas.procs[i].env = { HTTP_PROXY: egress[i].url, http_proxy: egress[i].url, ...(redis.sentinel ? { NODE_DEBUG: 'charging-fleet' } : {}) };
    }
    await replicas.startAll();
    const r = (run = new Run(sim, redis, nemeses, egress, replicas, say));
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
      const token = roll < 0.4 ? commandTokens[Math.floor(rnd() * commandTokens.length)] : roll < 0.55 ? DEPOT_TARGETS[Math.floor(rnd() * DEPOT_TARGETS.length)].token : watched[Math.floor(rnd() * watched.length)];
      if (roll < 0.55 && (commandRest.get(token) ?? 0) <= Date.now()) {
        commandRest.set(token, Date.now() + COMMAND_REST_MS);
        void (roll < 0.4 ? r.inject(token, ++seq) : r.wish(token));
      } else if (roll >= 0.55) await r.drive(token).catch((e: Error) => r.note(`driver: ${e.message}`));
      await delay(200 + rnd() * 500);
    }
    await faultLoop;
    for (const n of nemeses) n.heal();
    for (const e of egress) e.forwardMode = 'normal';
    await Promise.all([...r.restarts]);
    r.note('healed; settling');
    const endedAt = await settle(r);
    await settleDepot(sim, r.wishes, r.outages);
    const report = checkInvariants({
      sim,
      replicas,
      commands: r.commands,
      sessions: r.sessions,
      outages: r.outages,
      watched,
      from: r.t0,
      to: endedAt,
      secrets: [CLIENT_SECRET, REDIS_PASSWORD, SENTINEL_PASSWORD],
      budgetPerSec: BUDGET_PER_SEC,
      intervalMs: INTERVAL_MS,
    });
    checkDepot(sim, r.wishes, r.outages, r.t0, report.violations, report.figures);
    if ((report.violations.length > 0 || process.env.NEMESIS_KEEP) && process.env.NEMESIS_LOGS) keepLogs(process.env.NEMESIS_LOGS, options.seed, replicas, sim, r.t0);
    return { seed: options.seed, violations: report.violations, schedule: r.schedule, figures: { ...report.figures, ...(redis.sentinel ? { writesTheDemotedPrimaryAcknowledged: demotedWrites(replicas) } : {}) } };
  } finally {
    for (const n of nemeses) n.heal();
    if (run) await Promise.allSettled([...run.restarts]);
    await run?.close();
    await replicas?.remove();
    for (const n of nemeses) await n.close();
    for (const e of egress) await e.stop();
    await redis.close();
    await sim.stop();
  }
}

/** Durable writes a primary being replaced acknowledged, that no replica took as done (connection.ts's trace). */
function demotedWrites(replicas: Replicas): number {
  return replicas.procs.reduce((n, _, i) => n + (replicas.log(i).match(/acknowledged by \S+ and not taken as done/g) ?? []).length, 0);
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
