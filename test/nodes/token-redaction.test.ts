/**
 * A service that echoes the Authorization header in a 400 body, in the
 * runtime with Coordinate replicas: the token one configuration fetched and
 * the token the other read from Redis are both redacted in msg.error (what
 * Catch and the debug sidebar show), in the node's status and in the log.
 * Two configurations on one fleet key, reaching Redis by two spellings of its
 * URL, stand in for two replicas (as in fleet-nodes.test.ts).
 */
import assert from 'node:assert/strict';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { RedisServer, requireRedis } from '../redis-server';
import { assertNoSecret, attachSinks, CLIENT_ID, CLIENT_SECRET, helper, loggedText, NODES, runtimeSuite, send, Sink, statusCalls, type FlowNode } from '../harness';

describe('Tokens in errors, fetched or read from Redis (runtime, real Redis, simulator)', function () {
  const rt = runtimeSuite({}, { chargingSession: { fleet: { cycleMs: 150, leaseMs: 600 } } });
  let redis: RedisServer;
  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start();
  });
  after(async () => redis?.close());

  it('a 400 echoing the Authorization header: no token at Catch, in a status or in the log, for either replica', async () => {
    const fleetKey = `redact-${process.pid}`;
    const svc = (id: string) => ({ id, type: 'charging-service', name: `replica ${id.slice(3)}`, baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, timeout: 5, fleetKey });
    const flow: FlowNode[] = [
      { id: 'f1', type: 'tab', label: 'redact' },
      svc('svcA'),
      svc('svcB'),
      ...[
        { id: 'progA', type: 'charging-progress', service: 'svcA', wires: [['out']] },
        { id: 'progB', type: 'charging-progress', service: 'svcB', wires: [['out']] },
        { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] },
        { id: 'out', type: 'helper' },
        { id: 'caught', type: 'helper' },
      ].map((n) => ({ z: 'f1', ...n })),
    ];
    const cred = (url: string) => ({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: url });
    await helper.load(NODES, flow, { svcA: cred(redis.url), svcB: cred(redis.url.replace('127.0.0.1', 'localhost')) });
    attachSinks(flow);

    rt.sim.inject({ target: 'get', kind: 'echo', status: 400, times: 2 });
    send('progA', { payload: { token: 'RFID-A' } });
    const fromA = await Sink.of('caught').next();
    send('progB', { payload: { token: 'RFID-B' } });
    const fromB = await Sink.of('caught').nth(2);
    assert.equal(rt.sim.counters.tokenRequests, 1, 'replica B used the token replica A stored in Redis');

    const used = rt.sim.requests.filter((r) => r.path.startsWith(SESSIONS_PATH)).map((r) => String(r.headers.authorization).replace('Bearer ', ''));
    assert.equal(used.length, 2);
    assert.equal(used[0], used[1]);
    const token = used[0];
    assert.ok(token.length > 8);
    for (const [who, msg] of [
      ['fetched (A)', fromA],
      ['read from Redis (B)', fromB],
    ] as const) {
      const text = JSON.stringify(msg);
      assert.match(text, /Bearer \*\*\*/, `${who}: the echo is there, redacted: ${text}`);
      assertNoSecret(text, [token, token.slice(0, 24), CLIENT_SECRET], `msg.error at Catch, token ${who}`);
    }
    assertNoSecret(JSON.stringify(statusCalls()), [token, token.slice(0, 24)], 'a status');
    assertNoSecret(loggedText(), [token, token.slice(0, 24), CLIENT_SECRET], 'the log');
  });
});
