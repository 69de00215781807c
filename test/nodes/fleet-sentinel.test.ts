/**
 * Three real Node-RED replicas on Redis Sentinel (a primary, a replica and
 * three sentinels, each a real redis-server process: test/redis-sentinel.ts),
 * configured with a redis-sentinel:// URL, under load: 10 watched tokens, the
 * driver beginning and ending sessions, START and STOP injected on every
 * replica at once. SENTINEL FAILOVER, then kill -9 of the primary (restarted
 * as a replica, as a service manager would). The nemesis's invariants hold
 * with no allowance for either (test/fleet-process-invariants.ts): each
 * session's started and ended exactly once, each injected command at the
 * service exactly once, none that nobody injected, every token polled within
 * its bound of the promotion, the budget kept, no secret in any log.
 */
import assert from 'node:assert/strict';
import { runProcessChaos } from '../fleet-process-chaos';
import { requireRedis } from '../redis-server';

describe('fleet: three Node-RED processes on Redis Sentinel, failed over under load', function () {
  this.timeout(150_000);
  before(function () {
    requireRedis(this);
  });

  it('SENTINEL FAILOVER and kill -9 of the primary: every command once, every started/ended once, every token polled again within its bound', async () => {
    const report = await runProcessChaos({ seed: 4, seconds: 0, redis: 'sentinel', faults: ['failover', 'primary-kill'] });
    assert.equal(report.figures.failovers, 2, `both failovers happened:\n${report.schedule.join('\n')}`);
    assert.ok(report.figures.commands > 0, 'commands were injected');
    assert.ok(report.figures.sessions > 0, 'the driver began sessions');
    assert.equal(report.figures.commandsTwiceAfterDataLossOrGoneSender, 0);
    assert.equal(report.figures.eventsRepeatedAfterDataLoss, 0);
    console.log(`      every token polled again ${report.figures.repolledAfterPromotionMs} ms after the promotion at worst; ${report.figures.writesTheDemotedPrimaryAcknowledged} durable writes acknowledged by a primary being replaced, none taken as done`);
    assert.deepEqual(report.violations, [], `schedule:\n${report.schedule.join('\n')}`);
  });
});
