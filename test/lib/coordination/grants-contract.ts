/**
 * What every GrantPool keeps (nodes/lib/coordination/grants.ts), as a suite a
 * pool's tests run with their own factory: the local pool here, the Redis
 * one with its own clock control. Each case drives the pool's clock through
 * `advance` (a pool on Redis's clock: an offset its scripts add for tests).
 */
import assert from 'node:assert/strict';
import type { GrantAnswer, GrantOp, GrantPool, PoolRules } from '../../../nodes/lib/coordination/grants';

export interface PoolRig {
  pool: GrantPool;
  /** moves the pool's clock on, ms */
  advance(ms: number): Promise<void> | void;
}

const ask = (priority = 0, weight = 11, waitMs = 60_000): GrantOp => ({ op: 'ask', priority, weight, waitMs, lapseMs: 3_600_000, note: {} });
const hold = (weight = 11, create: Record<string, boolean> | null = { station: true }): GrantOp => ({ op: 'hold', priority: 0, weight, lapseMs: 3_600_000, note: {}, create });
const ok = (a: GrantAnswer) => {
  if (!a.ok) throw new Error(`unavailable: ${a.reason}`);
  return a;
};

export function grantPoolContract(make: (rules: PoolRules) => Promise<PoolRig>): void {
  it('at most `limit` granted; the others wait in order of their ask, with their positions; a release lets the head in', async () => {
    const { pool } = await make({ limit: 2, budgetKW: null, agingMs: 0 });
    const a = ok(await pool.sync('A', ask()));
    const b = ok(await pool.sync('B', ask()));
    const c = ok(await pool.sync('C', ask()));
    const d = ok(await pool.sync('D', ask()));
    assert.deepEqual([a.granted, b.granted, c.granted, d.granted], [true, true, false, false]);
    assert.deepEqual([c.position, d.position], [1, 2]);
    assert.equal(d.table.inUse, 2);
    assert.equal(d.table.waiting, 2);
    assert.deepEqual(d.table.holders.map((h) => h.key), ['A', 'B']);
    assert.deepEqual(d.table.head.map((h) => h.key), ['C', 'D']);
    assert.equal(ok(await pool.sync('D', ask())).granted, false, 'D is not the head: no overtaking');
    ok(await pool.sync('A', { op: 'release' }));
    assert.equal(ok(await pool.sync('D', ask())).granted, false, 'the head (C) is owed the slot');
    const c2 = ok(await pool.sync('C', ask()));
    assert.equal(c2.granted, true);
    assert.equal(c2.position, 0);
    assert.equal(ok(await pool.sync('B', ask())).granted, true, 'asking again while granted: still granted');
  });

  it('higher priority first; with aging, waiting agingMs is worth one level; agingMs 0 is strict priority', async () => {
    const strict = await make({ limit: 1, budgetKW: null, agingMs: 0 });
    ok(await strict.pool.sync('H', ask()));
    ok(await strict.pool.sync('low', ask(0)));
    await strict.advance(10_000_000);
    const high = ok(await strict.pool.sync('high', ask(1)));
    assert.equal(high.position, 1, 'strict: a higher priority goes first however long the other waited');
    const aging = await make({ limit: 1, budgetKW: null, agingMs: 1_000_000 });
    ok(await aging.pool.sync('H', ask()));
    ok(await aging.pool.sync('old', ask(0)));
    await aging.advance(999_000);
    assert.equal(ok(await aging.pool.sync('p1', ask(1))).position, 1, 'waited less than agingMs: the higher priority first');
    await aging.advance(2_000);
    assert.equal(ok(await aging.pool.sync('p1b', ask(1))).position, 2, 'waited more than agingMs than it: the old waiter first');
    assert.equal(ok(await aging.pool.sync('p2', ask(2))).position, 1);
  });

  it('a kW budget: granted while the weights fit; no overtaking a head that does not fit', async () => {
    const { pool } = await make({ limit: null, budgetKW: 20, agingMs: 0 });
    assert.equal(ok(await pool.sync('A', ask(0, 11))).granted, true);
    assert.equal(ok(await pool.sync('B', ask(0, 11))).granted, false, '22 kW > 20');
    const small = ok(await pool.sync('small', ask(0, 5)));
    assert.equal(small.granted, false, 'would fit, but the head does not');
    assert.equal(small.position, 2);
    ok(await pool.sync('A', hold(4))); // measured: A draws 4 kW
    assert.equal(ok(await pool.sync('B', ask(0, 11))).granted, true, '4 + 11 fits');
    const s = ok(await pool.sync('small', ask(0, 5)));
    assert.equal(s.granted, true, '4 + 11 + 5 = 20 fits');
    assert.equal(s.table.usedKW, 20);
  });

  it('hold counts a session: created only when asked to (over the limit if need be), a waiter becomes a holder; release frees it', async () => {
    const { pool } = await make({ limit: 1, budgetKW: null, agingMs: 0 });
    ok(await pool.sync('A', ask()));
    const none = ok(await pool.sync('S', hold(11, null)));
    assert.equal(none.entry, null);
    assert.equal(none.table.inUse, 1);
    const s = ok(await pool.sync('S', hold(7)));
    assert.equal(s.entry?.state, 'granted');
    assert.equal(s.entry?.note.station, true);
    assert.equal(s.table.inUse, 2, 'a station session counts, over the limit');
    assert.notEqual(s.table.overSince, null);
    ok(await pool.sync('W', ask()));
    const w = ok(await pool.sync('W', hold(3, null)));
    assert.equal(w.entry?.state, 'granted', 'a session came while it waited: it counts');
    assert.equal(w.table.waiting, 0);
    assert.equal(w.table.usedKW, 21);
    const r = ok(await pool.sync('S', { op: 'release' }));
    assert.equal(r.table.inUse, 2);
    const gone = ok(await pool.sync('S', { op: 'release' }));
    assert.equal(gone.entry, null, 'released twice: nothing');
  });

  it('over the limit: overSince is when it went over, again from each grant freed while still over, null once under', async () => {
    const rig = await make({ limit: 3, budgetKW: null, agingMs: 0 });
    const { pool } = rig;
    for (const k of ['A', 'B', 'C']) ok(await pool.sync(k, ask()));
    assert.ok((await pool.setLimit({ limit: 1, budgetKW: null })).ok);
    const first = ok(await pool.sync('A', hold()));
    assert.notEqual(first.table.overSince, null);
    const since = first.table.overSince as number;
    await rig.advance(5_000);
    assert.equal(ok(await pool.sync('B', hold())).table.overSince, since);
    const freed = ok(await pool.sync('C', { op: 'release' }));
    assert.equal(freed.table.overSince, freed.table.now, 'a grant freed while over: the wait starts again');
    assert.equal(ok(await pool.sync('B', { op: 'release' })).table.overSince, null);
  });

  it('a waiter not asked again within its waitMs is dropped; a grant lapses only when unrenewed for its lapseMs while others are renewed', async () => {
    const rig = await make({ limit: 1, budgetKW: null, agingMs: 0 });
    const { pool } = rig;
    ok(await pool.sync('A', { ...ask(), lapseMs: 10_000 } as GrantOp));
    ok(await pool.sync('W', ask(0, 11, 5_000)));
    await rig.advance(6_000);
    const t = ok(await pool.sync('X', { op: 'look' }));
    assert.equal(t.table.waiting, 0, 'W expired');
    await rig.advance(60_000);
    assert.equal(ok(await pool.sync('X', { op: 'look' })).table.inUse, 1, 'nobody renewed anything: A does not lapse');
    ok(await pool.sync('B', ask()));
    await rig.advance(11_000);
    ok(await pool.sync('B', ask()));
    await rig.advance(2_000);
    const after = ok(await pool.sync('B', ask()));
    assert.equal(after.table.holders.some((h) => h.key === 'A'), false, 'A lapsed behind B\'s renewals');
    assert.equal(after.granted, true);
  });

  it('a pool nobody could reach for longer than a lapse (Redis away 2 h, every process down): no grant lapses when its users come back one by one', async () => {
    const rig = await make({ limit: 2, budgetKW: null, agingMs: 0 });
    const { pool } = rig;
    ok(await pool.sync('A', ask()));
    ok(await pool.sync('B', ask()));
    ok(await pool.sync('W', ask()));
    await rig.advance(2 * 3_600_000);
    // Back: A's check comes first, W's a few seconds later, B's last (each control node checks at its own pace).
    ok(await pool.sync('A', hold()));
    await rig.advance(3_000);
    const w = ok(await pool.sync('W', ask()));
    assert.equal(w.granted, false, 'B\'s car still charges: its grant counts');
    assert.deepEqual(w.table.holders.map((h) => h.key).sort(), ['A', 'B']);
    await rig.advance(20_000);
    assert.equal(ok(await pool.sync('B', hold())).entry?.note.station, undefined, 'B held by its own grant, not created again');
    // A grant nobody renews still lapses once the others have been renewed for its lapseMs.
    for (let i = 0; i < 130; i++) {
      await rig.advance(30_000);
      ok(await pool.sync('A', hold()));
      ok(await pool.sync('W', ask()));
    }
    const after = ok(await pool.sync('W', ask()));
    assert.equal(after.granted, true, 'B lapsed after an hour of the others\' renewals');
  });

  it('setLimit at run time: waiters fit at once; configure keeps it unless the configured limit changed', async () => {
    const { pool } = await make({ limit: 1, budgetKW: null, agingMs: 0 });
    ok(await pool.sync('A', ask()));
    ok(await pool.sync('B', ask()));
    let changes = 0;
    const off = pool.onChange(() => changes++);
    const raised = await pool.setLimit({ limit: 2, budgetKW: null });
    assert.ok(raised.ok && raised.table.limit === 2);
    assert.ok(changes >= 1, 'told of the change');
    assert.equal(ok(await pool.sync('B', ask())).granted, true);
    await pool.configure({ limit: 1, budgetKW: null, agingMs: 0 });
    assert.equal(ok(await pool.sync('B', { op: 'look' })).table.limit, 2, 'redeployed with the same configuration: the run-time limit stays');
    await pool.configure({ limit: 3, budgetKW: 30, agingMs: 0 });
    const t = ok(await pool.sync('B', { op: 'look' })).table;
    assert.deepEqual([t.limit, t.budgetKW], [3, 30], 'the configuration changed: it wins');
    off();
    const list = await pool.list();
    assert.ok(list.ok);
    assert.deepEqual(list.ok && list.table.holders.map((h) => h.key), ['A', 'B']);
  });
}
