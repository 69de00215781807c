/**
 * The grants in Redis (a depot's slots across replicas): the same contract
 * as the local pool (grants-contract.ts), the pool's clock moved by an
 * offset its scripts add; then what only Redis has: two replicas on one pool
 * never grant past the limit, a change made on one is told on the other at
 * its next cycle, Redis away answers unavailable, and a pool Redis lost is
 * put back with its configured rules and grants nobody new while the
 * sessions still charging are counted again.
 */
import assert from 'node:assert/strict';
import type { GrantAnswer, GrantOp, PoolRules } from '../../../nodes/lib/coordination/grants';
import { RedisGrantPool } from '../../../nodes/lib/fleet/grants/redis-grant-pool';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';
import { grantPoolContract } from '../coordination/grants-contract';
import { fleetSuite, sleep } from './fleet-fixture';
import { until } from '../../harness';

const ask = (priority = 0, weight = 11): GrantOp => ({ op: 'ask', priority, weight, waitMs: 60_000, lapseMs: 3_600_000, note: {} });
const ok = (a: GrantAnswer) => {
  if (!a.ok) throw new Error(`unavailable: ${a.reason}`);
  return a;
};

describe('grants in Redis (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let n = 0;

  /** A pool of its own on a replica of the suite, its clock moved by `offset`. */
  function poolOn(f: Fleet, name: string, offset: { ms: number }, recountMs?: number): RedisGrantPool {
    return new RedisGrantPool({ connection: f.connection, keys: f.keys.grants(name), offsetMs: () => offset.ms, recountMs, everyCycle: (hook) => f.everyCycle(hook) });
  }

  describe('the contract', () => {
    grantPoolContract(async (rules: PoolRules) => {
      const offset = { ms: 0 };
      const pool = poolOn(suite.replica(), `contract-${++n}`, offset);
      await pool.configure(rules);
      return { pool, advance: (ms) => void (offset.ms += ms) };
    });
  });

  it('two replicas asking at once for a pool of limit 3: exactly 3 granted, whatever the order; the others queued in one order seen alike', async () => {
    const [a, b] = [suite.replica(), suite.replica()];
    const offset = { ms: 0 };
    const [pa, pb] = [poolOn(a, 'shared', offset), poolOn(b, 'shared', offset)];
    await Promise.all([pa.configure({ limit: 3, budgetKW: null, agingMs: 0 }), pb.configure({ limit: 3, budgetKW: null, agingMs: 0 })]);
    const keys = Array.from({ length: 10 }, (_, i) => `T-${i}`);
    const answers = (await Promise.all(keys.map((k, i) => (i % 2 ? pa : pb).sync(k, ask())))).map(ok);
    assert.equal(answers.filter((x) => x.granted).length, 3);
    const la = await pa.list();
    const lb = await pb.list();
    assert.ok(la.ok && lb.ok);
    assert.deepEqual(la.ok && la.queue.map((e) => e.key), lb.ok && lb.queue.map((e) => e.key));
    assert.equal(la.ok && la.table.inUse, 3);
  });

  it('a slot freed on one replica is told to the other replica\'s listeners at its next cycle', async () => {
    const [a, b] = [suite.replica(), suite.replica()];
    const offset = { ms: 0 };
    const [pa, pb] = [poolOn(a, 'told', offset), poolOn(b, 'told', offset)];
    await pa.configure({ limit: 1, budgetKW: null, agingMs: 0 });
    ok(await pa.sync('A', ask()));
    ok(await pb.sync('B', ask()));
    let told = 0;
    pb.onChange((mayAdmit) => mayAdmit && told++);
    await sleep(400);
    told = 0;
    ok(await pa.sync('A', { op: 'release' }));
    await until(() => told > 0, 'the other replica told', 3_000);
    assert.equal(ok(await pb.sync('B', ask())).granted, true);
  });

  it('Redis away: unavailable, never a grant; back: as before', async () => {
    const f = suite.replica();
    const pool = poolOn(f, 'away', { ms: 0 });
    await pool.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    ok(await pool.sync('A', ask()));
    await suite.redis.stop();
    const down = await pool.sync('B', ask());
    assert.equal(down.ok, false);
    assert.match(down.ok ? '' : down.reason, /could not be asked/);
    await suite.redis.start();
    await until(() => f.health.up, 'Redis back', 10_000);
    const back = ok(await pool.sync('B', ask()));
    assert.equal(back.granted, true);
    assert.equal(back.table.inUse, 2);
  });

  it('Redis lost the pool: its configured rules are back at once; a replica that had seen it grants nobody new for the re-count, holds count meanwhile', async () => {
    const f = suite.replica();
    const offset = { ms: 0 };
    const pool = poolOn(f, 'lost', offset, 30_000);
    await pool.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    ok(await pool.sync('A', ask()));
    await suite.redis.admin().flushall();
    const during = ok(await pool.sync('N', ask()));
    assert.equal(during.granted, false, 'nobody new while the charging cars are counted again');
    assert.equal(during.table.limit, 2, 'the configured limit is back');
    const held = ok(await pool.sync('A', { op: 'hold', priority: 0, weight: 11, lapseMs: 3_600_000, note: {}, create: {} }));
    assert.equal(held.table.inUse, 1, 'a session still charging counts again at its check');
    offset.ms += 31_000;
    assert.equal(ok(await pool.sync('N', ask())).granted, true, 'the re-count over');
  });
});

