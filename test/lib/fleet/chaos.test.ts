/**
 * Seeded random Redis faults over two replicas (test/fleet-chaos.ts): lost
 * replies, black holes, resets and write pauses while START and STOP are
 * injected on both and the watch runs; every injected command arrives once,
 * nothing else arrives, every started and ended is emitted once. A few short
 * seeds here; `npm run soak -- --fleet` runs many longer ones.
 */
import assert from 'node:assert/strict';
import { runFleetChaos } from '../../fleet-chaos';
import { RedisServer, requireRedis } from '../../redis-server';

const SEEDS = [1, 2, 3, 4];

describe('fleet: seeded random Redis faults over two replicas (real Redis, simulator)', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start();
  });
  after(async () => redis?.close());

  for (const seed of SEEDS) {
    it(`seed ${seed}: every command once at the service, every started and ended once`, async () => {
      const report = await runFleetChaos(redis, { seed, seconds: 5 });
      assert.ok(report.starts > 0, 'the schedule injected commands');
      assert.deepEqual(report.violations, [], `faults: ${report.faults.join(', ')}`);
    });
  }
});
