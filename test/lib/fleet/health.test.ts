/**
 * Health-aware Redis calls: while Redis is known down, the request budget and
 * the command claim skip it at once (their local fallbacks) instead of adding
 * a command timeout to every request; a silent partition (a black hole: the
 * socket stays open, nothing comes back) is found by the socket timeout, the
 * dead socket dropped and a new connection made once the path heals.
 */
import assert from 'node:assert/strict';
import { startCommand } from '../../../nodes/lib/session/commands';
import { monotonicNow } from '../../../nodes/lib/clock';
import { until } from '../../harness';
import { RedisNemesis } from '../../redis-nemesis';
import { fleetSuite, sleep, FAST, claimCommand } from './fleet-fixture';

describe('fleet: Redis known down is skipped at once; a silent partition is found (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let nemesis: RedisNemesis;
  beforeEach(async () => {
    nemesis = await RedisNemesis.start(suite.redis.port);
  });
  afterEach(async () => {
    suite.redis.thaw();
    await nemesis.close();
  });

  it('a frozen Redis: once health is down, budget takes and claims fall back without waiting for Redis', async () => {
    const a = suite.replica({ claims: { readBackMs: 300 } });
    await a.connection.open();
    const budget = a.budget(5);
    assert.equal((await budget.take(0)).kind, 'go');
    suite.redis.freeze();
    await until(() => !a.health.up, 'health down', 5_000);
    await sleep(350); // known down for longer than the claim's read-back time
    const t0 = monotonicNow();
    const takes = [];
    for (let i = 0; i < 5; i++) takes.push(await budget.take(1_000));
    const claim = await claimCommand(a, startCommand({ locationId: 'L', evseId: '1', token: 'RFID-DOWN' }), 5_000);
    const spent = monotonicNow() - t0;
    assert.deepEqual(takes.map((t) => t.kind), ['unavailable', 'unavailable', 'unavailable', 'unavailable', 'unavailable']);
    assert.equal(claim.role, 'unavailable');
    // Before, each of these six waited for its command timeout (400 ms here, 2 s by default).
    assert.ok(spent < FAST.commandTimeoutMs, `six calls took ${spent} ms`);
    suite.redis.thaw();
    await until(() => a.health.up, 'health up again (the heartbeat probes)', 8_000);
    assert.equal((await budget.take(0)).kind, 'go');
  });

  it('a black hole between a replica and Redis: the dead socket is dropped within seconds and a new one made after the heal', async () => {
    const a = suite.replica({ url: nemesis.urlFor(suite.redis.url) });
    await a.connection.open();
    nemesis.blackhole();
    await until(() => !a.health.up, 'health down', 5_000);
    // Nothing comes back and nothing is closed by the proxy: the client itself must give the socket up.
    await until(() => nemesis.dropped > 0, 'the dead socket dropped by the client', 5_000);
    nemesis.heal();
    await until(() => a.health.up, 'health up on a new connection', 8_000);
  });
});
