/**
 * Redis restarted without its data under a watch node with Coordinate
 * replicas (found by the nemesis over processes, test/fleet-process-chaos.ts):
 * the fleet holds no state for the watched tokens any more, and the replica
 * seeds them from what it kept locally. What it kept must be what it last
 * reported, not what it loaded when the node started: otherwise a session
 * that began since is reported `started` again, and one that ended while
 * Redis was away is never reported `ended`.
 */
import assert from 'node:assert/strict';
import { attachSinks, CLIENT_ID, CLIENT_SECRET, clientFor, helper, NODES, runtimeSuite, Sink, until, type FlowNode } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import { startCommand, stopCommand } from '../../nodes/lib/session/commands';

const FLEET = { cycleMs: 150, leaseMs: 600 };

describe('watch mode with Coordinate replicas: Redis restarted without its data', function () {
  this.timeout(30_000);
  const rt = runtimeSuite({ startDelayMs: 0, stopDelayMs: 0 }, { chargingSession: { fleet: FLEET, minPollIntervalSec: 0.1 } });
  let redis: RedisServer;
  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start({ persist: false });
  });
  after(async () => redis?.close());

  async function load(): Promise<Sink> {
    const svc = { id: 'svc', type: 'charging-service', name: 'replica', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, timeout: 5, fleetKey: `loss-${process.pid}-${Date.now()}` };
    const flow: FlowNode[] = [{ id: 'f1', type: 'tab', label: 'fleet' }, svc, { id: 'w', z: 'f1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, watchTokens: 'LOSS-1 LOSS-2', wires: [['out']] }, { id: 'out', z: 'f1', type: 'helper' }];
    await helper.load(NODES, flow, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url } });
    attachSinks(flow);
    return Sink.of('out');
  }
  const polls = (token: string) => rt.sim.requests.filter((r) => r.method === 'GET' && r.query.token === token).length;

  it('a session begun after the node started: started once, and ended once though it ended while Redis was away', async () => {
    const client = clientFor(rt.sim);
    try {
      const out = await load();
      const events = (kind: string, token: string) => out.messages.filter((m) => m.event === kind && m.topic === token).length;
      await until(() => polls('LOSS-1') > 0 && polls('LOSS-2') > 0, 'both tokens polled', 10_000);
      // Sessions on both after the node loaded its kept states (none): only what it reported since knows them.
      for (const t of ['LOSS-1', 'LOSS-2']) await client.sendCommand(startCommand({ locationId: 'L', evseId: t, token: t }));
      await until(() => events('started', 'LOSS-1') === 1 && events('started', 'LOSS-2') === 1, 'both started', 10_000);
      await redis.stop();
      // LOSS-2 ends while Redis is away (and the replica, its lease lapsed, polls nothing).
      await client.sendCommand(stopCommand({ locationId: 'L', evseId: 'LOSS-2', token: 'LOSS-2', transactionId: String(rt.sim.session('LOSS-2')?.transactionId) }));
      await new Promise((r) => setTimeout(r, 2 * FLEET.leaseMs));
      await redis.start();
      const before = polls('LOSS-1');
      await until(() => polls('LOSS-1') >= before + 5, 'polling again after Redis came back empty', 15_000);
      await until(() => events('ended', 'LOSS-2') >= 1, 'LOSS-2 ended', 3_000).catch(() => undefined);
      // The two tokens are polled in either order: each event once is what counts.
      const seen = out.messages.filter((m) => m.event === 'started' || m.event === 'ended').map((m) => `${String(m.event)} ${String(m.topic)}`).sort();
      assert.deepEqual(seen, ['ended LOSS-2', 'started LOSS-1', 'started LOSS-2'], 'each event once: the replica seeds its tokens from what it last reported, and LOSS-2 ended while Redis was away');
    } finally {
      await client.close();
    }
  });
});
