/**
 * The replica figures a metrics scrape reads (Coordination.figures), against a
 * real redis-server: the leases this configuration's nodes hold, the live
 * replicas, Redis's health and round trip, and the stand-downs; with Redis
 * stopped, the round trip is left out rather than made up.
 */
import assert from 'node:assert/strict';
import { RedisCoordination } from '../../../nodes/lib/fleet/coordination';
import { ChargingError } from '../../../nodes/lib/errors';
import { WatchShare, type WatchShareOptions } from '../../../nodes/lib/session/watch-share';
import { until } from '../../harness';
import { fleetSuite } from './fleet-fixture';

const TOKENS = Array.from({ length: 10 }, (_, i) => `RFID-FIG-${i}`);
const OPTIONS: WatchShareOptions = { voice: { warnOnce: () => undefined, report: () => undefined }, show: () => undefined };

describe('fleet: the figures for the metrics (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('leases held per configuration, replicas, Redis up with its round trip, stand-downs; Redis stopped: down, no round trip', async () => {
    const [a, b] = [new RedisCoordination(suite.replica()), new RedisCoordination(suite.replica())];
    const links = [new WatchShare(a.leases, 'w', OPTIONS), new WatchShare(b.leases, 'w', OPTIONS)];
    links[0].watch(TOKENS);
    // The first replica may lease every token before the second is seen; the share settles within a few cycles.
    const held = () => [a.figures().leasesHeld ?? 0, b.figures().leasesHeld ?? 0];
    await until(() => held()[0] + held()[1] === TOKENS.length && held().every((n) => n > 0) && a.figures().replicas === 2, 'every token leased, each replica a share', 10_000);
    const fa = a.figures();
    assert.equal(fa.redisUp, true);
    assert.ok(typeof fa.redisRoundTripSeconds === 'number' && fa.redisRoundTripSeconds > 0 && fa.redisRoundTripSeconds < 2, String(fa.redisRoundTripSeconds));
    assert.equal(fa.standDowns, 0);

    // Three failed polls in a row while the other replica gets answers: this one stands down, once.
    for (let i = 0; i < 3; i++) a.reach.polled(new ChargingError('NETWORK', 'refused'));
    const answers = setInterval(() => b.reach.polled(null), 50);
    try {
      await until(() => a.figures().standDowns === 1, 'a stood down', 10_000);
    } finally {
      clearInterval(answers);
    }
    assert.equal(b.figures().standDowns, 0);

    await suite.redis.stop();
    await until(() => a.figures().redisUp === false, 'Redis seen down');
    assert.equal(a.figures().redisRoundTripSeconds, undefined, 'left out while Redis does not answer');
    await Promise.all(links.map((l) => l.close(false)));
    assert.equal(b.figures().leasesHeld, 0, 'a closed scope holds nothing');
  });
});
