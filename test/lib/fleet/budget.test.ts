/**
 * Max requests per second for the fleet: replicas taking from one shared
 * budget as fast as it lets them, in one process and in three processes. The
 * grant times are Redis's own (TIME in the script), so the windows are
 * counted on one clock.
 */
import assert from 'node:assert/strict';
import { fleetSuite, sleep } from './fleet-fixture';
import { until } from '../../harness';
import { spawnReplica } from './replica-process';
import type { SharedRequestBudget } from '../../../nodes/lib/fleet/budget/budget';

/** The most grants in any closed 1 s window [t, t + 1 s]. */
function busiestSecond(grantsUs: number[]): number {
  const t = [...grantsUs].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (j < t.length && t[j] - t[i] <= 1_000_000) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

async function takeFor(budget: SharedRequestBudget, ms: number): Promise<number[]> {
  const grants: number[] = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const take = await budget.take(1_000);
    if (take.kind === 'go') {
      grants.push(take.atUs);
      await sleep(take.delayMs);
    } else if (take.kind === 'wait') await sleep(take.waitMs);
    else throw take.error;
  }
  return grants;
}

describe('fleet: one request budget for the fleet (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('5/s across three replicas in one process: never more than 6 starts in any 1 s window, and the rate is used', async () => {
    const replicas = [suite.replica(), suite.replica(), suite.replica()];
    await Promise.all(replicas.map((f) => f.connection.open()));
    const per = await Promise.all(replicas.map((f) => takeFor(f.budget(5), 1_500)));
    const all = per.flat();
    assert.ok(busiestSecond(all) <= 6, `busiest second: ${busiestSecond(all)}`);
    assert.ok(all.length >= 7, `grants in 1.5 s: ${all.length}`);
    // First come, first served at Redis: no replica starves.
    for (const g of per) assert.ok(g.length >= 2, `grants per replica: ${per.map((x) => x.length).join(' / ')}`);
  });

  it('5/s across three replica processes: never more than 6 starts in any 1 s window', async () => {
    const fleetKey = `budget-procs-${process.pid}`;
    const startAt = Date.now() + 1_200; // after the three processes have started
    const outputs = await Promise.all(
      [0, 1, 2].map(
        () =>
          new Promise<number[]>((resolve, reject) => {
            const child = spawnReplica({ mode: 'budget', url: suite.redis.url, fleetKey, limit: 5, startAt, durationMs: 1_500 });
            let out = '';
            child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
            child.on('exit', (code) => (code === 0 ? resolve((JSON.parse(out) as { grants: number[] }).grants) : reject(new Error(`replica exited ${code}`))));
          }),
      ),
    );
    const all = outputs.flat();
    assert.ok(busiestSecond(all) <= 6, `busiest second: ${busiestSecond(all)}`);
    assert.ok(all.length >= 7, `grants in 1.5 s: ${all.length}`);
    assert.ok(outputs.every((g) => g.length >= 2), `grants per process: ${outputs.map((g) => g.length).join(' / ')}`);
  });

  it('a lower rate after a 429 spaces this replica further; no limit takes nothing from Redis; Redis away is "unavailable" with the fallback rate', async () => {
    const a = suite.replica();
    suite.replica();
    await until(() => a.replicas().length === 2, 'both replicas seen alive');
    const slow = a.budget(10);
    const first = await slow.tryTake(2);
    assert.equal(first.kind, 'go');
    const second = await slow.tryTake(2);
    assert.equal(second.kind, 'wait');
    assert.ok(second.kind === 'wait' && second.waitMs > 100, 'spaced at 1/2 s, not 1/10 s');
    assert.equal((await a.budget(0).tryTake()).kind, 'go');
    await suite.redis.stop();
    const away = await slow.tryTake();
    assert.equal(away.kind, 'unavailable');
    assert.equal(slow.fallbackRate(), 5, 'the limit shared by the two replicas alive at the last heartbeat');
  });
});
