/**
 * The depot's rules as pure functions over a grants table: who yields for
 * whom (shed, preemption, turns), a full car, the words a control node shows;
 * the power estimate from meter readings; the settings and run-time values.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { GrantEntry, GrantTable } from '../../../nodes/lib/coordination/grants';
import { EnergyTrace } from '../../../nodes/lib/depot/power';
import { agedPriority, fittingWaiters, fullAtStop, idleFor, ordinal, queueReason, yieldFor } from '../../../nodes/lib/depot/rules';
import { depotSettings, parsePriority, runTimeLimits, type DepotSettings } from '../../../nodes/lib/depot/settings';

const S: DepotSettings = depotSettings({ limit: 2, minRun: 600, turn: 1800, aging: 3600, idleKWh: 0.1, idleWindow: 1800, overFor: 60 }).settings;
const MIN = 60_000;
/** the entry of `key` among the table's holders (a key not holding: a waiting stand-in, never picked) */
const me = (t: GrantTable, key: string): GrantEntry => t.holders.find((h) => h.key === key) ?? { ...entry(key), state: 'waiting' };
const entry = (key: string, e: Partial<GrantEntry> = {}): GrantEntry => ({ key, state: 'granted', priority: 0, weight: 11, askedAt: 0, since: 0, renewedAt: 0, note: {}, ...e });
function table(holders: readonly GrantEntry[], head: readonly GrantEntry[] = [], t: Partial<GrantTable> = {}): GrantTable {
  return { now: 100 * MIN, limit: 2, budgetKW: null, agingMs: 3_600_000, inUse: holders.length, usedKW: holders.reduce((s, h) => s + h.weight, 0), waiting: head.length, overSince: null, holders, head: head.map((w) => ({ ...w, state: 'waiting' })), ...t };
}

describe('depot rules (pure)', () => {
  it('turns: with someone waiting, the longest-running holder past `turn` yields, one per waiter; nobody before `turn`', () => {
    const t = table([entry('A', { since: 40 * MIN }), entry('B', { since: 60 * MIN })], [entry('W', { askedAt: 90 * MIN })]);
    assert.equal(yieldFor(t, me(t, 'A'), S)?.kind, 'turn');
    assert.equal(yieldFor(t, me(t, 'A'), S)?.reason, 'turn over after 60:00; 1 waiting');
    assert.equal(yieldFor(t, me(t, 'B'), S), null, 'one waiter: one turn');
    assert.equal(yieldFor({ ...t, now: 69 * MIN }, me({ ...t, now: 69 * MIN }, 'A'), S), null, 'not yet 30 minutes');
    const two = table(t.holders, [entry('W', { askedAt: 90 * MIN }), entry('V', { askedAt: 91 * MIN })]);
    assert.equal(yieldFor(two, me(two, 'B'), S)?.kind, 'turn', 'two waiters: both holders past their turn');
    const served = table([entry('A', { since: 40 * MIN, note: { yielding: 'turn' } }), entry('B', { since: 60 * MIN })], [entry('W', { askedAt: 90 * MIN })]);
    assert.equal(yieldFor(served, me(served, 'B'), S), null, 'the waiter is served by A, already stopping');
    assert.equal(yieldFor(t, me(t, 'A'), { ...S, turnMs: 0 }), null, 'turns off');
  });

  it('a waiter that fits now is not waiting for anyone: no turn, no preemption', () => {
    const t = table([entry('A', { since: 0 })], [entry('W', { askedAt: 90 * MIN, priority: 5 })]);
    assert.equal(fittingWaiters(t), 1);
    assert.equal(yieldFor(t, me(t, 'A'), S), null);
  });

  it('preemption: a waiter of higher priority (its own, not aged) takes the slot of the lowest priority, latest started holder past minRun', () => {
    const holders = [entry('A', { since: 10 * MIN, priority: 1 }), entry('B', { since: 20 * MIN }), entry('C', { since: 30 * MIN })];
    const t = table(holders, [entry('W', { priority: 2, askedAt: 99 * MIN })], { limit: 3 });
    assert.deepEqual(['A', 'B', 'C'].map((k) => yieldFor(t, me(t, k), { ...S, turnMs: 0 })?.kind ?? null), [null, null, 'preempt']);
    assert.match(yieldFor(t, me(t, 'C'), { ...S, turnMs: 0 })?.reason ?? '', /^priority 2 is waiting: stopped after 70:00; 1 waiting$/);
    const young = table([entry('A', { since: 95 * MIN })], [entry('W', { priority: 2, askedAt: 99 * MIN })], { limit: 1 });
    assert.equal(yieldFor(young, me(young, 'A'), S), null, 'minRun protects it');
    const aged = table([entry('A', { since: 0 })], [entry('W', { priority: 0, askedAt: 0 })], { limit: 1 });
    assert.equal(agedPriority(aged.head[0], aged.now, aged.agingMs), 1, 'aged one level');
    assert.equal(yieldFor(aged, me(aged, 'A'), { ...S, turnMs: 0 }), null, 'aging orders the queue; it does not stop a car');
  });

  it('shed: over the limit for overFor, the managed holder past minRun with the lowest priority and latest start; one at a time; never a station session', () => {
    const holders = [entry('A', { since: 0, priority: 1 }), entry('B', { since: 10 * MIN }), entry('S', { since: 50 * MIN, note: { station: true } })];
    const t = table(holders, [], { limit: 1, overSince: 99 * MIN });
    assert.equal(yieldFor(t, me(t, 'B'), S)?.kind, 'shed');
    assert.equal(yieldFor(t, me(t, 'B'), S)?.reason, 'over the limit: shed');
    assert.equal(yieldFor(t, me(t, 'A'), S), null);
    assert.equal(yieldFor(t, me(t, 'S'), S), null, 'a station session is never stopped by the depot');
    assert.equal(yieldFor({ ...t, overSince: 99.5 * MIN }, me({ ...t, overSince: 99.5 * MIN }, 'B'), S), null, 'not over for overFor yet');
    const stopping = table([entry('A', { since: 0, priority: 1 }), entry('B', { since: 10 * MIN, note: { yielding: 'shed' } }), entry('C', { since: 20 * MIN })], [], { limit: 1, overSince: 90 * MIN });
    assert.equal(yieldFor(stopping, me(stopping, 'C'), S), null, 'one at a time: B is still stopping');
    assert.equal(yieldFor(t, me(t, 'B'), { ...S, onOver: 'wait' }), null, 'onOver wait: nobody is stopped');
  });

  it('the order and its words; a full car', () => {
    assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal), ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '101st']);
    const t = table([entry('A'), entry('B')], [entry('W'), entry('V'), entry('U')]);
    assert.equal(queueReason(t, 1), 'waiting for a slot: 2 of 2 in use, 1st of 3');
    assert.equal(queueReason({ ...t, limit: null, budgetKW: 22, usedKW: 18.456 }, 2), 'waiting for a slot: 18.46 of 22 kW, 2 charging, 2nd of 3');
    assert.equal(idleFor(0.02, S)?.reason, 'car full or not drawing: 0.02 kWh in 30:00');
    assert.equal(idleFor(0.1, S), null);
    assert.equal(idleFor(null, S), null, 'the readings do not span the window yet');
    assert.equal(idleFor(0, { ...S, idleKWh: 0 }), null, 'off');
    // Stopped anyway for a turn: under idleKWh per idleWindow over what was seen is a full car, not a turn.
    assert.equal(fullAtStop({ ms: 25 * MIN, kWh: 0.05 }, S)?.reason, 'car full or not drawing: 0.05 kWh in 25:00');
    assert.equal(fullAtStop({ ms: 25 * MIN, kWh: 0.09 }, S), null, '0.09 kWh in 25 min is more than 0.1 kWh per 30 min');
    assert.equal(fullAtStop({ ms: 5 * MIN, kWh: 0 }, S), null, 'too little of the session seen');
    assert.equal(fullAtStop({ ms: 25 * MIN, kWh: 0 }, { ...S, idleKWh: 0 }), null, 'off');
  });

  it('property: whatever the table, at most as many holders are picked to yield as there are waiters they could serve, and never a station session', () => {
    const arb = fc.record({
      holders: fc.array(fc.record({ since: fc.integer({ min: 0, max: 100 }), priority: fc.integer({ min: -2, max: 2 }), station: fc.boolean(), yielding: fc.boolean() }), { maxLength: 6 }),
      waiters: fc.array(fc.record({ askedAt: fc.integer({ min: 0, max: 100 }), priority: fc.integer({ min: -2, max: 2 }) }), { maxLength: 6 }),
      limit: fc.integer({ min: 1, max: 6 }),
      over: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ holders, waiters, limit, over }) => {
        const hs = holders.map((h, i) => entry(`H${i}`, { since: h.since * MIN, priority: h.priority, note: { station: h.station, yielding: h.yielding ? 'turn' : null } }));
        const ws = waiters.map((w, i) => entry(`W${i}`, { askedAt: w.askedAt * MIN, priority: w.priority }));
        const t = table(hs, ws, { limit, inUse: hs.length, overSince: over ? 0 : null, now: 200 * MIN });
        const picked = hs.filter((h) => yieldFor(t, me(t, h.key), S) !== null);
        assert.ok(picked.every((h) => h.note.station !== true && h.note.yielding === null));
        if (over) assert.ok(picked.length <= 1, 'a shed is one at a time');
        else assert.ok(picked.length <= Math.max(0, ws.length - fittingWaiters(t)), `${picked.length} picked for ${ws.length} waiters`);
      }),
    );
  });
});

describe('depot power estimate', () => {
  it('assumed until two readings 10 s apart, then measured; stale: assumed again; a new transaction starts over', () => {
    const t = new EnergyTrace(3_600_000);
    t.add('TX1', 0, 1.0);
    assert.deepEqual(t.power(0, 60_000, 11), { kW: 11, source: 'assumed' });
    t.add('TX1', 5_000, 1.01);
    assert.equal(t.power(5_000, 60_000, 11).source, 'assumed', '5 s apart: not yet');
    t.add('TX1', 10_000, 1.02);
    const p = t.power(10_000, 60_000, 11);
    assert.equal(p.source, 'measured');
    assert.ok(Math.abs(p.kW - 7.2) < 1e-9, `${p.kW}`);
    assert.equal(t.power(80_000, 60_000, 11).source, 'assumed', 'the last reading is stale');
    t.add('TX2', 90_000, 0.0);
    assert.equal(t.power(90_000, 60_000, 11).source, 'assumed', 'a new session');
  });

  it('drawn over a window: null until the readings span it; a full car draws 0', () => {
    const t = new EnergyTrace(2_000_000, 1_800_000);
    for (let s = 0; s <= 1800; s += 30) t.add('TX', s * 1000, Math.min(20, s * 0.01));
    assert.ok(Math.abs((t.drawn(1_800_000) as number) - 18) < 1e-9);
    assert.equal(t.drawn(3_600_000), null);
    for (let s = 1830; s <= 4000; s += 30) t.add('TX', s * 1000, 20);
    assert.equal(t.drawn(1_800_000), 0);
  });
});

describe('depot settings', () => {
  it('a depot needs a limit or a budget; a budget below assumedKW could start nobody; what cannot be read is said', () => {
    assert.throws(() => depotSettings({}), /neither a limit of connectors nor a kW budget/);
    assert.throws(() => depotSettings({ limit: '2.5' }), /whole number of connectors/);
    assert.throws(() => depotSettings({ budgetKW: 7 }), /below the power a session counts/);
    assert.equal(depotSettings({ budgetKW: '22,5' }).settings.budgetKW, 22.5);
    const d = depotSettings({ limit: '3' });
    assert.deepEqual([d.settings.limit, d.settings.assumedKW, d.settings.minRunMs, d.settings.turnMs, d.settings.agingMs, d.settings.idleKWh, d.settings.idleWindowMs, d.settings.countStation, d.settings.onOver, d.settings.overForMs], [3, 11, 600_000, 0, 3_600_000, 0.1, 1_800_000, true, 'shed', 60_000]);
    const short = depotSettings({ limit: 1, turn: 60, minRun: 600 });
    assert.equal(short.settings.turnMs, 600_000);
    assert.match(short.warnings[0], /turns come after 600 s/);
  });

  it('run-time limits and msg.priority: anything else is INVALID_INPUT', () => {
    const now = { limit: 2, budgetKW: null };
    assert.equal(runTimeLimits({}, now, 11), null);
    assert.deepEqual(runTimeLimits({ limit: 4 }, now, 11), { limit: 4, budgetKW: null });
    assert.deepEqual(runTimeLimits({ budgetKW: '30' }, now, 11), { limit: 2, budgetKW: 30 });
    for (const bad of [{ limit: 0 }, { limit: 'x' }, { limit: null }, { budgetKW: 5 }, { limit: [2] }]) {
      assert.throws(() => runTimeLimits(bad, now, 11), (e: { code?: string }) => e.code === 'INVALID_INPUT', JSON.stringify(bad));
    }
    assert.deepEqual([parsePriority(3), parsePriority('-7'), parsePriority(undefined)], [3, -7, undefined]);
    for (const bad of [1.5, 'high', 1001, null, '1e3', true]) assert.throws(() => parsePriority(bad), (e: { code?: string }) => e.code === 'INVALID_INPUT', String(bad));
  });
});
