/**
 * Claims, the seam's "done once per key": alone the work runs at once; with
 * Redis one replica of three runs it and the others get its outcome; a claim
 * whose claimer died is taken over only when the policy says so.
 */
import assert from 'node:assert/strict';
import { localClaims, type ClaimRun } from '../../../nodes/lib/coordination/claims';
import { RedisCoordination } from '../../../nodes/lib/fleet/coordination';
import { fleetSuite, sleep } from '../fleet/fleet-fixture';

describe('claims: the local default', () => {
  it('runs the work at once, every time, and says it was not shared', async () => {
    let runs = 0;
    const policy = { workMs: 1_000, takeOver: 'never' as const };
    const a = await localClaims.run(['k'], async () => ++runs, policy, () => assert.fail('never unshared alone'));
    const b = await localClaims.run(['k'], async () => ++runs, policy, () => assert.fail('never unshared alone'));
    assert.deepEqual([a, b], [
      { role: 'ran', shared: false, result: 1 },
      { role: 'ran', shared: false, result: 2 },
    ]);
  });

  it('passes the work\'s failure on as it is', async () => {
    await assert.rejects(localClaims.run(['k'], () => Promise.reject(new Error('boom')), { workMs: 1_000, takeOver: 'never' }, () => undefined), /boom/);
  });
});

describe('claims: through Redis (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('three replicas ask for the same key: one runs it, the others get its outcome; another key runs apart', async () => {
    const replicas = [suite.replica(), suite.replica(), suite.replica()];
    await Promise.all(replicas.map((f) => f.connection.open()));
    let runs = 0;
    const work = async () => {
      runs++;
      await sleep(100);
      return { record: 'T-1' };
    };
    const policy = { workMs: 5_000, takeOver: 'never' as const };
    const results = await Promise.all(replicas.map((f) => new RedisCoordination(f).claims.run(['ledger', 'T-1', '1'], work, policy, () => assert.fail('Redis is up'))));
    assert.equal(runs, 1);
    const ran = results.filter((r) => r.role === 'ran');
    assert.equal(ran.length, 1);
    assert.ok(ran[0].role === 'ran' && ran[0].shared && replicas.some((f) => f.replicaId === (ran[0] as { by?: string }).by));
    for (const r of results.filter((x) => x.role !== 'ran')) assert.deepEqual(r.role === 'duplicate' && r.outcome, { ok: true, result: { record: 'T-1' } });
    const other = await new RedisCoordination(replicas[0]).claims.run(['ledger', 'T-2', '1'], work, policy, () => undefined);
    assert.equal(other.role, 'ran');
    assert.equal(runs, 2);
  });

  it('a claimer gone without an outcome: taken over with "when-claimer-gone", left to lapse with "never"', async () => {
    const dead = suite.replica({ cycleMs: 100, leaseMs: 300 });
    const live = suite.replica({ cycleMs: 100, leaseMs: 300 });
    await Promise.all([dead.connection.open(), live.connection.open()]);
    // The dead replica claims both keys and never finishes.
    const never = new Promise<never>(() => undefined);
    for (const key of ['gone:a', 'gone:b']) void new RedisCoordination(dead).claims.run([key], () => never, { workMs: 20_000, takeOver: 'never' }, () => undefined);
    await sleep(200);
    await dead.close();
    let took: ClaimRun<string> | null = null;
    const takeOver = new RedisCoordination(live).claims.run(['gone:a'], async () => 'here', { workMs: 8_000, takeOver: 'when-claimer-gone' }, () => undefined).then((r) => (took = r));
    const leftAlone = await new RedisCoordination(live).claims.run(['gone:b'], async () => 'here', { workMs: 1_500, takeOver: 'never' }, () => undefined);
    assert.equal(leftAlone.role, 'unknown', 'never taken over: the claim is waited out');
    await takeOver;
    assert.deepEqual(took, { role: 'ran', shared: true, result: 'here', by: live.replicaId });
  });
});
