/**
 * Three real Node-RED processes with the same flows, one simulator, one Redis
 * (issue 35): the replicas coordinate through the configuration's *Coordinate
 * replicas*. Each replica marks its requests (test/fleet-replicas.ts), so the
 * simulator says which replica sent what; the flows' outputs are read from the
 * replicas' logs. The tests run in order on the same three processes (the
 * watch tests follow one fleet through a kill -9, a rejoin and a Redis
 * outage). settings.js: cycle 200 ms, lease 800 ms.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { ServiceClient } from '../../nodes/lib/client/service-client';
import { commandKey, type ChargingServiceSimulator } from '../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, clientFor, delay, freePort, startSimulator, until, type FlowNode } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import { arrivals, busiestSecondOf, FAST_FLEET, longestDoublePolling, longestGap, recorder, REPLICA_HEADER, Replicas, type Output } from '../fleet-replicas';

const N = 3;
const REDIS_PASSWORD = 'Redis-Pa55word-Never-Shown';
/** the watch node's interval */
const INTERVAL_MS = 2000;
const WATCHED = Array.from({ length: 300 }, (_, i) => `W-${String(i).padStart(3, '0')}`);
/** a replica's polls of a token further apart than this: it had stopped polling it */
const RUN_GAP_MS = INTERVAL_MS * 1.6;
const { cycleMs: CYCLE_MS, leaseMs: LEASE_MS } = FAST_FLEET;

function flowFor(sim: ChargingServiceSimulator): FlowNode[] {
  const service = { type: 'charging-service', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', maxInFlight: 8, apiKeyHeader: REPLICA_HEADER };
  return [
    { id: 'tab', type: 'tab', label: 'replicas' },
    // svc: Max requests per second 5 (the budget test); svc2: no budget, its own fleet key (commands, watch).
    { id: 'svc', name: 'budget5', timeout: 30, maxRequestsPerSec: 5, ...service },
    { id: 'svc2', name: 'fleet2', timeout: 10, fleetKey: 'replicas-test-2', ...service },
    { id: 'burst', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '[]', payloadType: 'json', repeat: '', once: false, x: 100, y: 100, wires: [['fanout']] },
    { id: 'fanout', type: 'function', z: 'tab', func: 'for (const token of msg.payload) node.send({ payload: { token } });\nreturn null;', outputs: 1, x: 250, y: 100, wires: [['q']] },
    { id: 'q', type: 'charging-progress', z: 'tab', service: 'svc', x: 400, y: 100, wires: [['recQ']] },
    { id: 'start-in', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{}', payloadType: 'json', repeat: '', once: false, x: 100, y: 200, wires: [['start']] },
    { id: 'start', type: 'charging-start', z: 'tab', service: 'svc2', x: 400, y: 200, wires: [['recS']] },
    { id: 'watch-in', type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic: 'watch', payload: '[]', payloadType: 'json', repeat: '', once: false, x: 100, y: 300, wires: [['w']] },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc2', mode: 'watch', interval: INTERVAL_MS / 1000, x: 400, y: 300, wires: [['recW']] },
    { id: 'catch', type: 'catch', z: 'tab', scope: null, uncaught: false, x: 100, y: 400, wires: [['recE']] },
    recorder('recQ', 700, 100),
    recorder('recS', 700, 200),
    recorder('recW', 700, 300),
    recorder('recE', 700, 400),
  ];
}

/** Each (token, event, transaction, meter) of the watch node's outputs at most once in the union. */
function repeatedEvents(outs: Output[]): string[] {
  const seen = new Set<string>();
  const repeated: string[] = [];
  for (const o of outs) {
    const key = `${o.topic} ${o.event} ${o.tx ?? ''} ${o.event === 'updated' ? String(o.meter) : ''}`;
    if (seen.has(key)) repeated.push(`${key} (replica ${o.replica})`);
    seen.add(key);
  }
  return repeated;
}

const countOf = (outs: Output[], event: string, token: string) => outs.filter((o) => o.event === event && o.topic === token).length;

describe('three Node-RED replicas, one simulator, one Redis (issue 35)', function () {
  this.timeout(120_000);
  let sim: ChargingServiceSimulator;
  let redis: RedisServer;
  let fleet: Replicas;
  let client: ServiceClient | null = null;

  before(async function () {
    requireRedis(this);
    this.timeout(90_000);
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 200_000 });
    redis = await RedisServer.start({ password: REDIS_PASSWORD });
    const settings = `    chargingSession: { minPollIntervalSec: 0.2, fleet: { cycleMs: ${CYCLE_MS}, leaseMs: ${LEASE_MS} } },`;
    const coordination = { coordination: redis.url };
    fleet = await Replicas.prepare(N, flowFor(sim), settings, { svc: coordination, svc2: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...coordination } }, ['svc', 'svc2']);
    await fleet.startAll();
  });

  after(async function () {
    this.timeout(60_000);
    await fleet?.remove();
    await client?.close();
    await redis?.close();
    await sim?.stop();
  });

  afterEach(function () {
    if (!fleet) return;
    const all = fleet.procs.map((_, i) => fleet.log(i)).join('\n');
    // Nothing secret in any log line (outputs are log lines too).
    for (const secret of [CLIENT_SECRET, REDIS_PASSWORD]) assert.ok(!all.includes(secret), 'a secret reached a log');
    assert.doesNotMatch(all, /Unhandled|uncaughtException/);
  });

  it('a 5/s budget on every replica, all three sending as fast as they can: no 1 s window at the simulator above 6', async () => {
    const from = sim.requests.length;
    const per = 10;
    await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'burst', [{ p: 'payload', v: JSON.stringify(Array.from({ length: per }, (_, k) => `Q-${i}-${k}`)), vt: 'json' }])));
    const outs = await fleet.outputsOf('recQ', N * per, 30_000);
    assert.deepEqual(fleet.outputs('recE'), [], 'no errors');
    assert.ok(outs.every((o) => o.statusCode === 404), 'every query answered');
    const got = arrivals(sim, from, 'GET');
    for (let i = 0; i < N; i++) assert.equal(got.filter((a) => a.replica === i).length, per, `replica ${i} sent its ${per} queries`);
    // Each replica alone keeps 5/s: without the fleet's budget the three would reach about 15.
    const busiest = busiestSecondOf(got.map((a) => a.at));
    assert.ok(busiest <= 6, `at most 6 requests in any second, saw ${busiest}`);
  });

  it('one token request for the three replicas (the fleet shares its token)', () => {
    // Test order: only the budget test has sent requests, all on svc (one fleet key).
    assert.equal(sim.counters.tokenRequests, 1, `token requests: ${sim.counters.tokenRequests}`);
  });

  it('an inject START on every replica at the same moment: one START arrives, the other two output msg.fleet.role duplicate', async () => {
    const cmd = { locationId: 'LOC-C', evseId: '1', token: 'C-1' };
    await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'start-in', [{ p: 'payload', v: JSON.stringify(cmd), vt: 'json' }])));
    const outs = await fleet.outputsOf('recS', N, 15_000);
    await delay(500); // a late fourth output or a second arrival would show now
    assert.equal(fleet.outputs('recS').length, N);
    const key = commandKey({ action: 'START', ...cmd })?.key ?? '';
    assert.equal(sim.arrivals('START', key), 1, 'one START at the simulator');
    const sender = arrivals(sim, 0, 'POST').find((a) => a.token === cmd.token)?.replica;
    const dups = outs.filter((o) => o.fleet?.role === 'duplicate');
    assert.equal(dups.length, N - 1, JSON.stringify(outs));
    const sent = outs.filter((o) => o.fleet?.role !== 'duplicate');
    assert.equal(sent.length, 1);
    assert.equal(sent[0].replica, sender, 'the replica whose START arrived output as the sender');
    assert.equal(sent[0].fleet?.role, 'sent');
    assert.ok(dups.every((d) => d.fleet?.sentBy === sent[0].fleet?.replica), 'the duplicates name the sender');
    assert.ok(dups.every((d) => d.statusCode === sent[0].statusCode && d.statusCode === 202), 'duplicates carry the sender outcome');
    // sentBy names the sender: its replica id, which Redis maps to its process.
    const sentBy = new Set(dups.map((d) => d.fleet?.sentBy));
    assert.equal(sentBy.size, 1);
    const info = await redis.admin().hget('chargectl:{replicas-test-2}:replicas:info', String([...sentBy][0]));
    assert.equal((JSON.parse(info ?? '{}') as { pid?: number }).pid, fleet.procs[sender ?? -1]?.pid, 'sentBy is the sender');
    assert.deepEqual(fleet.outputs('recE'), []);
  });

  it('the same START again once its window has passed: one more arrives, its refusal (409) reaches Catch on every replica, naming the sender on the other two', async () => {
    const cmd = { locationId: 'LOC-C', evseId: '1', token: 'C-1' };
    const key = commandKey({ action: 'START', ...cmd })?.key ?? '';
    const before = sim.arrivals('START', key);
    await delay(2500); // past the dedup window (2 s): a new command, not a duplicate of the first
    await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'start-in', [{ p: 'payload', v: JSON.stringify(cmd), vt: 'json' }])));
    const errors = await fleet.outputsOf('recE', N, 15_000);
    await delay(500);
    assert.equal(sim.arrivals('START', key), before + 1, 'one more START at the simulator');
    const sender = arrivals(sim, 0, 'POST').filter((a) => a.token === cmd.token).at(-1)?.replica;
    assert.ok(errors.every((e) => e.error?.source?.id === 'start' && /already active/.test(e.error?.message ?? '')), JSON.stringify(errors));
    const named = errors.filter((e) => /sent by replica/.test(e.error?.message ?? ''));
    assert.deepEqual(named.map((e) => e.replica).sort(), [0, 1, 2].filter((i) => i !== sender));
    assert.equal(fleet.outputs('recS').length, N, 'no output besides the errors');
    assert.equal(fleet.outputs('recE').length, N);
  });

  it('Redis stopped while all three send: nothing crashes, each replica keeps its share of the budget (5/3 per second), and the fleet budget is back with Redis', async () => {
    const burst = async (tag: string) => {
      const from = sim.requests.length;
      const before = fleet.outputs('recQ').length;
      const per = 6;
      await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'burst', [{ p: 'payload', v: JSON.stringify(Array.from({ length: per }, (_, k) => `R-${tag}-${i}-${k}`)), vt: 'json' }])));
      await until(() => fleet.outputs('recQ').length >= before + N * per, `the ${tag} burst answered`, 30_000);
      const got = arrivals(sim, from, 'GET');
      assert.equal(got.length, N * per);
      const t0 = got[0].at;
      const shown = fleet.procs.map((_, i) => `replica ${i}: ${got.filter((a) => a.replica === i).map((a) => a.at - t0).join(' ')}`).join('; ');
      // Each replica's own spacing from its third request on (the first two may be 200 ms apart: the first took its place at the fleet's rate).
      const gaps = fleet.procs.flatMap((_, i) => got.filter((a) => a.replica === i).slice(2).map((a, k, l) => (k === 0 ? Infinity : a.at - l[k - 1].at)));
      return { busiest: busiestSecondOf(got.map((a) => a.at)), shown, shortestGap: Math.min(...gaps) };
    };
    const tokensBefore = sim.counters.tokenRequests;
    const errorsBefore = fleet.outputs('recE').length;
    await redis.stop();
    try {
      const away = await burst('away');
      // Each replica keeps to 5/3 per second (600 ms apart)...
      assert.ok(away.shortestGap >= 500, `Redis away: each replica at its share, 600 ms apart (ms: ${away.shown})`);
      // ...and the outage's first second holds the bound too: the place taken at the fleet's whole rate when Redis
      // went away is followed by one at the replica's share (9 were seen before that: one extra per replica).
      assert.ok(away.busiest <= 6, `Redis away: at most 6 requests in any second, saw ${away.busiest} (ms: ${away.shown})`);
      assert.ok(fleet.procs.every((p) => p.running), 'every replica runs');
    } finally {
      await redis.start();
    }
    for (let i = 0; i < N; i++) await until(() => /\[charging-service:budget5\] Coordinate replicas: Redis answers again/.test(fleet.log(i)), `replica ${i} back on Redis`, 15_000);
    const back = await burst('back');
    assert.ok(back.busiest <= 6, `Redis back: at most 6 requests in any second, saw ${back.busiest} (ms: ${back.shown})`);
    assert.equal(sim.counters.tokenRequests, tokensBefore, 'the token each replica holds serves on');
    assert.equal(fleet.outputs('recE').length, errorsBefore, 'no errors');
    for (let i = 0; i < N; i++) {
      const downs = fleet.log(i).match(/\[charging-service:budget5\] Coordinate replicas: .*Redis/g) ?? [];
      assert.ok(downs.length >= 1 && downs.length <= 2, `replica ${i} said once that Redis was away and once that it is back: ${downs.join(' | ')}`);
    }
  });

  describe('watch mode across the replicas', () => {
    /** sessions started at the simulator by the test, per token */
    const startedByTest = new Map<string, number>();
    const endedByTest = new Map<string, number>();
    let owner = new Map<string, number>();

    const startSession = async (token: string, evse: string) => {
      await (client ??= clientFor(sim)).sendCommand({ action: 'START', locationId: 'LOC-W', evseId: evse, token });
      startedByTest.set(token, (startedByTest.get(token) ?? 0) + 1);
    };
    const stopSession = async (token: string) => {
      const s = sim.session(token);
      assert.ok(s, `a session for ${token}`);
      await (client ??= clientFor(sim)).sendCommand({ action: 'STOP', locationId: s.locationId, evseId: s.evseId, token, transactionId: s.transactionId });
      endedByTest.set(token, (endedByTest.get(token) ?? 0) + 1);
    };
    /** started and ended once per session the test started and stopped, nothing repeated, in the union of outputs */
    const checkEvents = () => {
      const outs = fleet.outputs('recW');
      assert.deepEqual(repeatedEvents(outs), [], 'no event repeated');
      for (const t of WATCHED) {
        assert.equal(countOf(outs, 'started', t), startedByTest.get(t) ?? 0, `started of ${t}`);
        assert.equal(countOf(outs, 'ended', t), endedByTest.get(t) ?? 0, `ended of ${t}`);
      }
    };

    it('300 watched tokens: each polled by exactly one replica, spread over the three, each event once', async () => {
      for (let i = 0; i < 20; i++) await startSession(WATCHED[i], String(i));
      await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'watch-in', [{ p: 'payload', v: JSON.stringify(WATCHED), vt: 'json' }, { p: 'topic', v: 'watch', vt: 'str' }])));
      const polled = (from: number) => new Set(arrivals(sim, from, 'GET').map((a) => a.token));
      const begin = sim.requests.length;
      await until(() => WATCHED.every((t) => polled(begin).has(t)), 'every token polled', 20_000);
      await until(() => WATCHED.every((t) => countOf(fleet.outputs('recW'), 'started', t) >= (startedByTest.get(t) ?? 0)), 'the started events', 10_000);
      // A settled fleet: watch a window of three intervals.
      await delay(2 * CYCLE_MS);
      const from = sim.requests.length;
      const t0 = Date.now();
      await delay(3 * INTERVAL_MS);
      const window = arrivals(sim, from, 'GET').filter((a) => WATCHED.includes(a.token));
      const seconds = (Date.now() - t0) / 1000;
      owner = new Map();
      const pollsOf = new Map<string, number>();
      for (const a of window) {
        assert.ok(!owner.has(a.token) || owner.get(a.token) === a.replica, `${a.token} polled by replicas ${owner.get(a.token)} and ${a.replica}`);
        owner.set(a.token, a.replica);
        pollsOf.set(a.token, (pollsOf.get(a.token) ?? 0) + 1);
      }
      assert.equal(owner.size, WATCHED.length, 'every token polled in the window');
      const expected = seconds / (INTERVAL_MS / 1000);
      const most = Math.max(...pollsOf.values());
      assert.ok(most <= expected + 1.5, `at most about ${expected.toFixed(1)} polls of a token in ${seconds.toFixed(1)} s, saw ${most}`);
      for (let i = 0; i < N; i++) {
        const owned = [...owner.values()].filter((r) => r === i).length;
        assert.ok(owned >= 60 && owned <= 140, `replica ${i} polls ${owned} of 300`);
      }
      checkEvents();
    });

    it('kill -9 of a replica: its tokens taken over within lease + 2 cycles (+ an interval to poll), no event repeated, no ended lost', async () => {
      const victim = 2;
      const from = sim.requests.length; // the victim's last polls included: its runs and the new owners' must not overlap
      const mine = WATCHED.filter((t) => owner.get(t) === victim);
      // Tokens with no session yet, the victim's and the others', for sessions started around the kill.
      const idleMine = mine.filter((t) => !sim.session(t));
      const idleOthers = WATCHED.filter((t) => owner.get(t) !== victim && !sim.session(t));
      // Sessions that start and end around the kill, on the victim's tokens and on others'.
      for (const t of [...idleMine.slice(0, 5), ...idleOthers.slice(0, 3)]) await startSession(t, `k-${t}`);
      const toStop = WATCHED.slice(0, 20).filter((t) => sim.session(t));
      await delay(INTERVAL_MS);
      const killedAt = Date.now();
      await fleet.kill(victim);
      for (const t of toStop.slice(0, 10)) await stopSession(t);
      for (const t of idleMine.slice(5, 10)) await startSession(t, `k-${t}`);
      const bound = LEASE_MS + 2 * CYCLE_MS + INTERVAL_MS;
      await delay(bound + 2 * INTERVAL_MS);
      const after = arrivals(sim, from, 'GET').filter((a) => a.at >= killedAt);
      // (a poll already on its way when the kill came may land just after it)
      assert.ok(after.every((a) => a.replica !== victim || a.at < killedAt + 100), 'nothing from the dead replica');
      const gap = longestGap(after, mine, killedAt, Date.now());
      // Generous on a shared machine: the bound, plus a second for the noise of three Node-REDs on two cores.
      assert.ok(gap.ms <= bound + 1000, `${gap.token} unpolled for ${gap.ms} ms after the kill (bound ${bound} ms)`);
      const double = longestDoublePolling(arrivals(sim, from, 'GET'), RUN_GAP_MS);
      assert.ok(double.replicas.includes(victim), 'the victim polled in the window, then others did');
      assert.ok(double.ms <= 0, `${double.token} polled by replicas ${double.replicas.join(' and ')} at once for ${double.ms} ms`);
      await until(() => WATCHED.every((t) => countOf(fleet.outputs('recW'), 'ended', t) >= (endedByTest.get(t) ?? 0)), 'the ended events', 10_000);
      checkEvents();
    });

    it('the killed replica back: tokens spread over three again, never two polling one token at once', async () => {
      const victim = 2;
      const from = sim.requests.length;
      await fleet.start(victim);
      // As a flow that sets its watch list at start would (the list is the fleet's: this adds nothing new).
      await fleet.inject(victim, 'watch-in', [{ p: 'payload', v: JSON.stringify(WATCHED), vt: 'json' }, { p: 'topic', v: 'watch', vt: 'str' }]);
      await until(() => arrivals(sim, from, 'GET').some((a) => a.replica === victim), 'the replica polling again', 20_000);
      await delay(2 * INTERVAL_MS);
      const recent = arrivals(sim, sim.requests.length - 200, 'GET');
      assert.ok(recent.some((a) => a.replica === victim));
      const double = longestDoublePolling(arrivals(sim, from, 'GET'), RUN_GAP_MS);
      assert.ok(double.ms <= CYCLE_MS, `${double.token} polled by replicas ${double.replicas.join(' and ')} at once for ${double.ms} ms`);
      checkEvents();
    });

    it('Redis stopped for 4 s and started again: nothing crashes, polling stops within a lease and resumes, never two replicas on one token for longer than a lease', async () => {
      const from = sim.requests.length;
      const stoppedAt = Date.now();
      await redis.stop();
      await delay(4000);
      const restartedAt = Date.now();
      await redis.start();
      const begin = sim.requests.length;
      await until(() => new Set(arrivals(sim, begin, 'GET').map((a) => a.token)).size >= WATCHED.length, 'every token polled again', 20_000);
      await delay(INTERVAL_MS);
      assert.ok(fleet.procs.every((p) => p.running), 'every replica still runs');
      const polls = arrivals(sim, from, 'GET');
      // Leases end locally before Redis would let another replica take them; a poll already on its way may land a little later.
      const late = polls.filter((a) => a.at > stoppedAt + LEASE_MS + 500 && a.at < restartedAt);
      assert.deepEqual(late.slice(0, 5), [], 'no polls while Redis was away, after the leases ended');
      const double = longestDoublePolling(polls, RUN_GAP_MS);
      assert.ok(double.ms <= LEASE_MS, `${double.token} polled by replicas ${double.replicas.join(' and ')} at once for ${double.ms} ms`);
      for (let i = 0; i < N; i++) assert.match(fleet.log(i), /Coordinate replicas: Redis answers again/, `replica ${i} said Redis is back`);
      checkEvents();
    });
  });
});

/** GET / of an editor: its status code, or 0 when nothing answers. */
function editorStatus(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', timeout: 5000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
  });
}

describe('npm start -- --replicas 2', function () {
  this.timeout(120_000);

  it('starts a Redis, the simulator and two Node-RED replicas whose editors answer, the demo coordinated through that Redis; Ctrl-C stops all', async function () {
    requireRedis(this);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-start-replicas-'));
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), SIM_PORT: String(await freePort()), CHARGING_DATA_DIR: dataDir };
    delete env.CHARGING_COORDINATION;
    const child = spawn(process.execPath, [path.join(__dirname, '..', '..', 'scripts', 'start.js'), '--replicas', '2'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let redis: Redis | null = null;
    let redisPort = 0;
    try {
      await until(() => (out.match(/^\[replica-\d\] .*Started flows/gm) ?? []).length === 2 || child.exitCode !== null, 'both replicas to start', 60_000);
      assert.equal(child.exitCode, null, out);
      assert.deepEqual(await Promise.all([editorStatus(port), editorStatus(port + 1)]), [200, 200], 'both editors answer');
      for (const i of [1, 2]) assert.ok(fs.existsSync(path.join(dataDir, `replica-${i}`, 'flows.json')), `replica-${i} has its own user dir`);
      // The demo's watch node opens its configuration's fleet: both replicas join it in that Redis.
      const url = /^Redis: +(redis:\/\/127\.0\.0\.1:\d+)/m.exec(out)?.[1];
      assert.ok(url, out);
      redisPort = Number(new URL(url).port);
      redis = new Redis(url, { maxRetriesPerRequest: 1 });
      // Processes, not members: each configuration of the demo (three, one fleet key) joins as a member of its own.
      const members = async () => {
        const pids = new Set<number>();
        for (const k of await (redis as Redis).keys('chargectl:*:replicas:info')) {
          for (const v of Object.values(await (redis as Redis).hgetall(k))) pids.add((JSON.parse(v) as { pid: number }).pid);
        }
        return pids.size;
      };
      let seen = 0;
      const end = Date.now() + 30_000;
      while ((seen = await members()) < 2 && Date.now() < end) await delay(200);
      assert.equal(seen, 2, `two replica processes in the fleet:\n${out.slice(-3000)}`);
      assert.doesNotMatch(out, /Unhandled|uncaughtException|\[error\]/);
    } finally {
      redis?.disconnect();
      const exited = new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code))));
      child.kill('SIGINT');
      const code = await exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
      assert.equal(code, 0, out.slice(-3000));
    }
    assert.deepEqual(await Promise.all([editorStatus(port), editorStatus(port + 1)]), [0, 0], 'both editors stopped');
    const redisGone = await new Promise<boolean>((resolve) => {
      const s = net.connect(redisPort, '127.0.0.1', () => {
        s.destroy();
        resolve(false);
      });
      s.on('error', () => resolve(true));
    });
    assert.ok(redisGone, 'its redis-server stopped');
  });
});
