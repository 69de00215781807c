/**
 * Coordinate replicas through the runtime, in one process: two charging-service
 * configurations with the same fleet key stand in for two replicas. A process
 * is one replica however many configurations it has, so they reach the same
 * Redis by two spellings of its URL (127.0.0.1 and localhost): each then
 * opens its own Fleet (connection, replica id), as separate Node-RED
 * processes do. Real processes: fleet-replicas.test.ts.
 */
import assert from 'node:assert/strict';
import { SESSIONS_PATH, TOKEN_PATH } from '../../simulator/simulator';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { RedisServer, requireRedis } from '../redis-server';
import { assertNoSecret, attachSinks, CLIENT_ID, CLIENT_SECRET, clientFor, helper, loggedText, NODES, runtimeSuite, send, Sink, statusCalls, until, type FlowNode } from '../harness';
import { Fleet } from '../../nodes/lib/fleet/fleet';
import type { SavedState } from '../../nodes/lib/session/watcher';
import { startCommand, stopCommand } from '../../nodes/lib/session/commands';

const FLEET = { cycleMs: 150, leaseMs: 600 };
const REDIS_PASSWORD = 'redis-Pa55-word';

describe('Coordinate replicas in the runtime (two configurations as two replicas)', function () {
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { fleet: FLEET, minPollIntervalSec: 0.1 } });
  let redis: RedisServer;
  let n = 0;
  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start({ password: REDIS_PASSWORD });
  });
  after(async () => redis?.close());

  /** Two configurations, svcA and svcB, on one fleet key, and the given nodes. */
  async function loadTwo(sim: ChargingServiceSimulator, nodes: FlowNode[], service: Record<string, unknown> = {}): Promise<void> {
    const fleetKey = `rt-${process.pid}-${++n}`;
    const svc = (id: string) => ({ id, type: 'charging-service', name: `replica ${id.slice(3)}`, baseUrl: sim.baseUrl, authUrl: sim.authUrl, timeout: 5, maxInFlight: 8, fleetKey, ...service });
    const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc('svcA'), svc('svcB'), ...nodes.map((x) => ({ z: 'f1', ...x }))];
    const cred = (url: string) => ({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: url });
    await helper.load(NODES, flow, { svcA: cred(redis.url), svcB: cred(redis.url.replace('127.0.0.1', 'localhost')) });
    attachSinks(flow);
  }

  const commands = (sim: ChargingServiceSimulator) => sim.requests.filter((r) => r.method === 'POST' && r.path.startsWith(SESSIONS_PATH));
  const role = (m: Record<string, unknown>) => (m.fleet as { role?: string } | undefined)?.role;

  it('the same START on both replicas at once is sent once; the other passes on its outcome, marked duplicate', async () => {
    await loadTwo(rt.sim, [
      { id: 'startA', type: 'charging-start', service: 'svcA', wires: [['out']] },
      { id: 'startB', type: 'charging-start', service: 'svcB', wires: [['out']] },
      { id: 'out', type: 'helper' },
    ]);
    const out = Sink.of('out');
    const input = { payload: { locationId: 'LOC-1', evseId: 3, token: 'RFID-FLEET-1' } };
    send('startA', input);
    send('startB', input);
    await out.nth(2);
    assert.equal(commands(rt.sim).length, 1, 'one START at the service');
    assert.deepEqual(out.messages.map(role).sort(), ['duplicate', 'sent']);
    for (const m of out.messages) {
      assert.equal(m.statusCode, 202);
      assert.deepEqual(m.payload, { action: 'START', locationId: 'LOC-1', evseId: '3', token: 'RFID-FLEET-1' });
    }
    const dup = out.messages.find((m) => role(m) === 'duplicate') as { fleet: { sentBy: string } };
    const sent = out.messages.find((m) => role(m) === 'sent') as { fleet: { replica: string } };
    assert.equal(dup.fleet.sentBy, sent.fleet.replica);
    const tokens = rt.sim.requests.map((r) => String(r.headers.authorization ?? '')).filter((a) => a.startsWith('Bearer ')).map((a) => a.slice(7));
    assertNoSecret(JSON.stringify({ msgs: out.messages, statuses: statusCalls() }) + loggedText(), [CLIENT_SECRET, REDIS_PASSWORD, ...tokens], 'messages, statuses and log');
  });

  it("the sender's error reaches the other replica's Catch as the same error, naming the sender; one request", async () => {
    rt.sim.inject({ target: 'post', kind: 'status', status: 409, times: 1, body: JSON.stringify({ message: 'connector busy' }) });
    await loadTwo(rt.sim, [
      { id: 'startA', type: 'charging-start', service: 'svcA', wires: [['out']] },
      { id: 'startB', type: 'charging-start', service: 'svcB', wires: [['out']] },
      { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] },
      { id: 'out', type: 'helper' },
      { id: 'caught', type: 'helper' },
    ]);
    const caught = Sink.of('caught');
    const input = { payload: { locationId: 'LOC-1', evseId: 4, token: 'RFID-FLEET-2' } };
    send('startA', input);
    send('startB', input);
    await caught.nth(2);
    assert.equal(commands(rt.sim).length, 1);
    const errors = caught.messages.map((m) => (m.error as { message: string }).message);
    for (const e of errors) assert.match(e, /409/);
    assert.equal(errors.filter((e) => /\(START sent by replica .+\)$/.test(e)).length, 1);
    assert.equal(errors[0].replace(/ \(START sent by replica .+\)$/, ''), errors[1].replace(/ \(START sent by replica .+\)$/, ''), 'the same error on both');
    assert.equal(Sink.of('out').messages.length, 0);
  });

  it('two configurations of one process with the same Redis and fleet key are one replica (one Fleet, one member)', async () => {
    const fleetKey = `rt-${process.pid}-${++n}`;
    const svc = (id: string) => ({ id, type: 'charging-service', name: `config ${id.slice(3)}`, baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, fleetKey });
    const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc('svcA'), svc('svcB'), { id: 'pA', z: 'f1', type: 'charging-progress', service: 'svcA', mode: 'watch', interval: 1, watchTokens: 'ONE-1' }, { id: 'pB', z: 'f1', type: 'charging-progress', service: 'svcB', mode: 'watch', interval: 1, watchTokens: 'ONE-2' }];
    const cred = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url };
    await helper.load(NODES, flow, { svcA: cred, svcB: cred });
    const admin = redis.admin();
    const members = async () => admin.zrange(`chargectl:{${fleetKey}}:replicas`, '0', '-1');
    const deadline = Date.now() + 5000;
    while ((await members()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 3 * FLEET.cycleMs));
    assert.equal((await members()).length, 1, 'one replica');
    await helper.unload();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await members()).length, 0, 'left the fleet when the last configuration closed');
  });

  it('one token for the fleet: two replicas querying get their token from one token request', async () => {
    await loadTwo(rt.sim, [
      { id: 'pA', type: 'charging-progress', service: 'svcA', wires: [['out']] },
      { id: 'pB', type: 'charging-progress', service: 'svcB', wires: [['out']] },
      { id: 'out', type: 'helper' },
    ]);
    send('pA', { payload: { token: 'RFID-T-1' } });
    await Sink.of('out').nth(1);
    send('pB', { payload: { token: 'RFID-T-2' } });
    await Sink.of('out').nth(2);
    assert.equal(rt.sim.requests.filter((r) => r.path === TOKEN_PATH).length, 1);
  });

  it('Max requests per second holds for the fleet: 2/s on each configuration, 12 queries over both, never more than 3 in a second at the service', async () => {
    await loadTwo(
      rt.sim,
      [
        { id: 'pA', type: 'charging-progress', service: 'svcA', wires: [['out']] },
        { id: 'pB', type: 'charging-progress', service: 'svcB', wires: [['out']] },
        { id: 'out', type: 'helper' },
      ],
      { maxRequestsPerSec: 2 },
    );
    for (let i = 0; i < 6; i++) {
      send('pA', { payload: { token: `RFID-B-A${i}` } });
      send('pB', { payload: { token: `RFID-B-B${i}` } });
    }
    await Sink.of('out').nth(12, 20_000);
    const times = rt.sim.requests.filter((r) => r.path.startsWith(SESSIONS_PATH)).map((r) => r.at);
    assert.equal(times.length, 12);
    let most = 0;
    for (const t of times) most = Math.max(most, times.filter((u) => u >= t && u < t + 1000).length);
    assert.ok(most <= 3, `at most limit + 1 = 3 in any second, saw ${most}`);
    // Each replica alone would allow 2/s, 4/s together: the fleet's spacing makes 12 queries take about 5.5 s.
    assert.ok(Math.max(...times) - Math.min(...times) >= 4500, `spread over ${Math.max(...times) - Math.min(...times)} ms`);
  });

  it('watch mode: a token leased by another replica is not polled here; when it leaves, its tokens are taken over from the committed state: no started again, each ended once', async () => {
    const tokens = ['W-1', 'W-2', 'W-3', 'W-4', 'W-5', 'W-6'];
    const client = clientFor(rt.sim);
    for (const t of tokens) await client.sendCommand(startCommand({ locationId: 'L', evseId: t, token: t }));
    await until(() => tokens.every((t) => (rt.sim.session(t)?.startedAt ?? Infinity) <= Date.now()), 'the sessions to start');
    const fleetKey = `rt-${process.pid}-${++n}`;
    // Replica B: a Fleet in the test, on the watch node's scope (its id); it polls nothing, and commits what it "saw".
    const other = new Fleet({ url: redis.url, fleetKey, ...FLEET });
    const committed: string[] = [];
    const ownB = other.scope<SavedState>('w', {
      onChange: (c) => {
        for (const a of c.acquired) {
          const tx = rt.sim.session(a.item)?.transactionId ?? null;
          void ownB.commit(a.item, { transactionId: tx, meterEnd: null, session: null }).then((r) => r.ok && committed.push(a.item));
        }
      },
    });
    try {
      // A member before this replica starts: this one never holds a token that is the other's.
      await until(() => ownB.replicas().length === 1, 'the other replica a member', 5_000);
      const svc = { id: 'svc', type: 'charging-service', name: 'replica A', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, timeout: 5, fleetKey };
      const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc, { id: 'w', z: 'f1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, watchTokens: tokens.join(' '), wires: [['out']] }, { id: 'out', z: 'f1', type: 'helper' }];
      await helper.load(NODES, flow, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url } });
      attachSinks(flow);
      const out = Sink.of('out');
      const events = (kind: string) => out.messages.filter((m) => m.event === kind).map((m) => String(m.topic));
      // The other replica may take every token at its first cycle (before this one is a member) and hand some over at
      // the next: those come here from its committed state, so the test waits for what it holds, not for what it took.
      await until(
        () => {
          const own = ownB.owned();
          return own.length > 0 && own.every((t) => committed.includes(t)) && tokens.every((t) => events('started').includes(t) || committed.includes(t));
        },
        'each token started here or committed there',
        10_000,
      );
      const theirs = ownB.owned();
      const polled = (t: string) => rt.sim.requests.filter((r) => r.method === 'GET' && r.query.token === t).length;
      const before = theirs.map(polled);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.deepEqual(theirs.map(polled), before, `${theirs.join(', ')} are leased by the other replica: not polled here`);
      const startedHere = events('started');
      assert.equal(new Set(startedHere).size, startedHere.length, 'no token started twice');
      for (const t of startedHere) assert.ok(!theirs.includes(t), `${t} started here is not the other replica's`);

      await other.close(); // leases given back: this replica takes them over at its next cycle
      await until(() => theirs.every((t) => polled(t) >= 2), 'the taken-over tokens polled here', 10_000);
      for (const t of tokens) await client.sendCommand(stopCommand({ locationId: 'L', evseId: t, token: t, transactionId: String(rt.sim.session(t)?.transactionId) }));
      await until(() => events('ended').length >= tokens.length, 'every session ended', 10_000);
      await new Promise((r) => setTimeout(r, 600));
      assert.deepEqual([...events('ended')].sort(), [...tokens].sort(), 'each ended exactly once');
      assert.deepEqual(events('started'), startedHere, 'nothing started again after the takeover');
    } finally {
      await client.close();
      await other.close();
    }
  });
  it('watch mode: a replica whose polls cannot reach the service (wrong secret) while its peer\'s get answers gives its tokens to the peer', async () => {
    const tokens = ['SD-1', 'SD-2', 'SD-3', 'SD-4', 'SD-5', 'SD-6'];
    const fleetKey = `rt-${process.pid}-${++n}`;
    // Replica B: a Fleet in the test on the watch node's scope; it holds leases and gets answers from the service.
    const other = new Fleet({ url: redis.url, fleetKey, ...FLEET });
    const ownB = other.scope<SavedState>('w');
    const good = clientFor(rt.sim);
    const answers = setInterval(() => void good.getProgress('SD-B').then(() => other.reach.polled(null), () => undefined), 100);
    try {
      const svc = { id: 'svc', type: 'charging-service', name: 'replica A', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, timeout: 2, fleetKey };
      const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc, { id: 'w', z: 'f1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, watchTokens: tokens.join(' '), wires: [['out']] }, { id: 'out', z: 'f1', type: 'helper' }];
      await helper.load(NODES, flow, { svc: { clientId: CLIENT_ID, clientSecret: 'not-the-secret', coordination: redis.url } });
      // The other replica may own every token before this one joins: wait for the stand-down itself first.
      await until(() => /gives its watched tokens and control targets to the others: \d+ queries in a row got no answer from the service \(/.test(loggedText()), 'this replica stands down', 15_000);
      await until(() => ownB.owned().length === tokens.length, 'the other replica owns every token', 15_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(ownB.owned().length, tokens.length, 'they stay there while this replica cannot reach the service');
    } finally {
      clearInterval(answers);
      await good.close();
      await other.close();
    }
  });
  it('watch mode: the poll demand told to the request budget is the fleet\'s whole list, also for tokens leased after the start', async () => {
    const tokens = Array.from({ length: 8 }, (_, i) => `PD-${i}`);
    const fleetKey = `rt-${process.pid}-${++n}`;
    const svc = { id: 'svc', type: 'charging-service', name: 'replica A', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, timeout: 5, fleetKey, maxRequestsPerSec: 2 };
    const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc, { id: 'w', z: 'f1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.5, watchTokens: tokens.join(' '), wires: [['out']] }, { id: 'out', z: 'f1', type: 'helper' }];
    await helper.load(NODES, flow, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url } });
    // 8 tokens every 0.5 s is 16 requests/s against 2/s: the schedule stretches, and says so with the fleet's figures.
    await until(() => /Watching 8 tokens every 0\.5 s needs 16 requests\/s/.test(loggedText()), 'the stretch warning with the fleet\'s figures', 8_000);
  });
});
