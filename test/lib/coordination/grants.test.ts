/**
 * The local grant pool: the contract every pool keeps, and what a process
 * alone adds: each change kept in its store before it is answered (no record,
 * no grant), the queue's order after a restart, and the re-count of charging
 * cars before anyone new is granted.
 */
import assert from 'node:assert/strict';
import { LocalGrantPool } from '../../../nodes/lib/coordination/grant-pool';
import { UnavailablePool, type GrantAnswer, type GrantPool, type GrantOp, type GrantStore, type KeptGrant, type KeptLimits } from '../../../nodes/lib/coordination/grants';
import { LocalCoordination } from '../../../nodes/lib/coordination/local';
import { grantPoolContract } from './grants-contract';

class MemoryGrantStore implements GrantStore {
  readonly entries = new Map<string, KeptGrant>();
  limits: KeptLimits | null = null;
  failing = false;
  writes = 0;

  load(): Promise<{ entries: unknown[]; limits: unknown } | null> {
    return Promise.resolve({ entries: [...this.entries.values()].map((e) => JSON.parse(JSON.stringify(e)) as unknown), limits: this.limits });
  }

  save(key: string, entry: KeptGrant | undefined): Promise<void> {
    if (this.failing) return Promise.reject(new Error('disk full'));
    this.writes++;
    if (entry) this.entries.set(key, JSON.parse(JSON.stringify(entry)) as KeptGrant);
    else this.entries.delete(key);
    return Promise.resolve();
  }

  saveLimits(limits: KeptLimits): Promise<void> {
    if (this.failing) return Promise.reject(new Error('disk full'));
    this.limits = limits;
    return Promise.resolve();
  }
}

const ask = (priority = 0): GrantOp => ({ op: 'ask', priority, weight: 11, waitMs: 600_000, lapseMs: 3_600_000, note: { state: 'queued' } });
const hold: GrantOp = { op: 'hold', priority: 0, weight: 11, lapseMs: 3_600_000, note: {}, create: { station: true } };
const ok = (a: GrantAnswer) => {
  if (!a.ok) throw new Error(`unavailable: ${a.reason}`);
  return a;
};

describe('grants: the local pool', () => {
  describe('the contract', () => {
    grantPoolContract(async (rules) => {
      let now = 1_000_000;
      const pool = new LocalGrantPool({ store: new MemoryGrantStore(), now: () => now, recountMs: 0 });
      await pool.configure(rules);
      return { pool, advance: (ms) => void (now += ms) };
    });
  });

  it('no record, no grant: a store that cannot keep the grant answers unavailable and the table is as before', async () => {
    const store = new MemoryGrantStore();
    const pool = new LocalGrantPool({ store, now: () => 1_000 });
    await pool.configure({ limit: 1, budgetKW: null, agingMs: 0 });
    store.failing = true;
    const a = await pool.sync('A', ask());
    assert.equal(a.ok, false);
    assert.match(!a.ok ? a.reason : '', /could not keep its table \(disk full\)/);
    store.failing = false;
    const b = ok(await pool.sync('B', ask()));
    assert.equal(b.granted, true, 'A holds nothing');
    assert.equal(b.table.inUse, 1);
    assert.equal((await pool.setLimit({ limit: 2, budgetKW: null })).ok, true);
    store.failing = true;
    const refused = await pool.setLimit({ limit: 5, budgetKW: null });
    assert.equal(refused.ok, false);
    assert.equal(ok(await pool.sync('B', { op: 'look' })).table.limit, 2, 'a limit that could not be kept is not in force');
  });

  it('renewals write nothing; a weight that wobbles within 0.5 kW writes nothing', async () => {
    const store = new MemoryGrantStore();
    const pool = new LocalGrantPool({ store, now: () => 1_000 });
    await pool.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    ok(await pool.sync('A', ask()));
    const writes = store.writes;
    for (let i = 0; i < 10; i++) ok(await pool.sync('A', { ...hold, weight: 7.21 + i * 0.001 }));
    assert.equal(store.writes, writes + 1, 'one write for 11 → 7.2 kW, none for the wobble');
  });

  it('a restart keeps the queue order and the limit set at run time, and grants nobody new until the kept grants are seen again (or the re-count ends)', async () => {
    const store = new MemoryGrantStore();
    let now = 1_000_000;
    const first = new LocalGrantPool({ store, now: () => now });
    await first.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    await first.setLimit({ limit: 1, budgetKW: null });
    ok(await first.sync('A', ask()));
    ok(await first.sync('W2', ask()));
    ok(await first.sync('W1', ask(1)));
    now += 3_600_000; // two hours away: nothing lapses or expires for it
    const again = new LocalGrantPool({ store, now: () => now, recountMs: 60_000 });
    await again.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    const list = await again.list();
    assert.ok(list.ok);
    assert.deepEqual(list.ok && list.queue.map((e) => e.key), ['W1', 'W2'], 'the queue in its order');
    assert.equal(list.ok && list.table.limit, 1, 'the run-time limit');
    ok(await again.sync('A', { op: 'release' })); // A's car is gone
    const w1 = ok(await again.sync('W1', ask(1)));
    assert.equal(w1.granted, true, 'every kept grant seen again: the re-count is over');
    const store2 = new MemoryGrantStore();
    const p = new LocalGrantPool({ store: store2, now: () => now });
    await p.configure({ limit: 2, budgetKW: null, agingMs: 0 });
    ok(await p.sync('A', ask()));
    const third = new LocalGrantPool({ store: store2, now: () => now, recountMs: 60_000 });
    assert.equal(ok(await third.sync('N', ask())).granted, false, 'A kept and not seen again yet: nobody new');
    now += 60_001;
    assert.equal(ok(await third.sync('N', ask())).granted, true, 'the re-count ended; A still counts');
    assert.equal(ok(await third.sync('N', { op: 'look' })).table.inUse, 2);
  });

  it('a damaged store is read as far as it can be; an unavailable pool grants nothing; the local grants keep one pool per name', async () => {
    const store = new MemoryGrantStore();
    store.entries.set('x', { key: 'x' } as unknown as KeptGrant);
    store.entries.set('y', { key: 'y', state: 'granted', askedAt: 5, priority: 'high', weight: -3, note: { a: { b: 1 }, c: 'ok' } } as unknown as KeptGrant);
    const pool = new LocalGrantPool({ store, now: () => 1_000, recountMs: 0 });
    const l = await pool.list();
    assert.ok(l.ok);
    assert.deepEqual(l.ok && l.table.holders.map((h) => [h.key, h.priority, h.weight, h.note]), [['y', 0, 0, { c: 'ok' }]]);
    const none: GrantPool = new UnavailablePool('no store');
    const a = await none.sync('A', ask());
    assert.equal(a.ok, false);
    const local = new LocalCoordination();
    assert.equal(local.grants.open('d1', store), local.grants.open('d1', new MemoryGrantStore()), 'one pool per name');
  });
});
