/**
 * charging-depot through the real runtime against the simulator, time
 * compressed: admission (a START only with a slot), the slot handed on
 * within one check (an off, an end at the station, a round without a
 * session), turns with no overlap, priority and aging. Counted at the
 * service: the STARTs that arrived and the exact peak of sessions at once.
 */
import assert from 'node:assert/strict';
import { load, send, until, delay, runtimeSuite, statusCalls } from '../harness';
import { caught, commands, control, depot, depotSessions, CATCH, Outputs, SINKS, startsOf, target } from './depot-fixture';

const [A, B, C, D] = [1, 2, 3, 4].map(target);
const on = (t: typeof A, extra: Record<string, unknown> = {}) => send('ctl', { payload: true, target: t, ...extra });
const off = (t: typeof A) => send('ctl', { payload: false, target: t });

describe('charging-depot (runtime + simulator, compressed time)', function () {
  this.timeout(40_000);
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const peak = () => rt.sim.peakSessions(depotSessions);

  it('limit 2, four on: exactly 2 STARTs, peak 2, the others queued 1st and 2nd with msg.depot and the badge', async () => {
    await load(rt.sim, [depot(), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    for (const t of [A, B, C, D]) on(t);
    await until(() => [A, B].every((t) => out.states(t).includes('charging')) && [C, D].every((t) => out.states(t).includes('queued')), 'two charging, two queued', 8000);
    await delay(1000); // three checks more: nobody else starts
    assert.deepEqual([A, B, C, D].map((t) => startsOf(rt.sim, t)), [1, 1, 0, 0]);
    assert.equal(peak(), 2);
    const c = out.last(C) as Record<string, unknown>;
    const d = out.last(D) as Record<string, unknown>;
    // Output when each joined the queue: C was alone in it then.
    assert.match(String(c.reason), /^waiting for a slot: 2 of 2 in use, 1st of [12]$/);
    assert.equal(d.reason, 'waiting for a slot: 2 of 2 in use, 2nd of 2');
    assert.deepEqual({ ...(c.depot as object), waiting: 2 }, { position: 1, waiting: 2, inUse: 2, limit: 2, usedKW: 22, budgetKW: null });
    assert.equal((d.depot as { position: number }).position, 2);
    assert.equal((out.last(A)?.depot as { position: unknown }).position, null);
    assert.deepEqual([C, D].map((t) => out.states(t)), [['queued'], ['queued']], 'queued once each: a check that changes nothing outputs nothing');
    await until(() => statusCalls('ctl').some((s) => /: on → queued [12]\/2/.test(String(s.text))), 'the badge of a queued connector', 3000);
    assert.deepEqual(caught(), []);
  });

  it('the slot is handed on within one check: an off, an end at the station, a START round that brought no session', async () => {
    // Checks 2 s apart: a waiter that waited for its own next check would take up to 2 s; handed on, it starts at once.
    await load(rt.sim, [depot({ limit: 1 }), control({ checkInterval: 2, waitTimeout: 0.5 }), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    on(C);
    on(D);
    await until(() => out.states(D).includes('queued'), 'D queued');
    // 1. An off.
    off(A);
    await until(() => out.states(B).includes('charging'), 'B charging after the off', 8000);
    const aGone = out.when(A, 'idle') as number;
    const bStart = out.when(B, 'starting') as number;
    assert.ok(bStart - aGone < 1000, `B's START ${Math.round(bStart - aGone)} ms after A was seen gone`);
    // 2. An end at the station.
    assert.equal(rt.sim.stationStop(B.token), true);
    await until(() => out.states(C).includes('charging'), 'C charging after B ended at the station', 8000);
    const bGone = out.when(B, 'idle') as number;
    assert.equal(out.last(B)?.reason, 'ended at the station');
    assert.ok((out.when(C, 'starting') as number) - bGone < 1000, 'C started at once');
    // 3. A round that brought no session: C's session ends, D's two STARTs bring nothing; D's slot goes back.
    rt.sim.inject({ target: 'post', kind: 'ignore-start', times: 2 });
    rt.sim.stationStop(C.token);
    await until(() => out.states(D).includes('failed'), 'D failed after two STARTs', 8000);
    assert.equal(startsOf(rt.sim, D), 2);
    on(A); // A asks again: the slot D's round held is free at once
    await until(() => out.states(A).filter((s) => s === 'charging').length === 2, 'A charging again', 8000);
    assert.equal(peak(), 1, 'never two at once');
    assert.equal(rt.sim.counters.duplicateStarts, 0, 'no START while the token had a session');
    assert.deepEqual(caught(), []);
  });

  it('turns: limit 1, two on, turns of 1 s: STARTs alternate, never two at once; a STOP the station ignores keeps the slot', async () => {
    await load(rt.sim, [depot({ limit: 1, turn: 1, minRun: 1 }), control({ waitTimeout: 0.5 }), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 1 }); // A's first turn STOP is ignored
    on(B);
    await until(() => commands(rt.sim).filter((c) => c.action === 'START').length >= 5, 'five STARTs in turns', 20_000);
    const starts = commands(rt.sim).filter((c) => c.action === 'START').map((c) => c.token);
    assert.deepEqual(starts.slice(0, 5), [A.token, B.token, A.token, B.token, A.token]);
    assert.equal(peak(), 1, 'break before make: the next starts only once the last is gone');
    const stopsOfA = commands(rt.sim).filter((c) => c.action === 'STOP' && c.token === A.token);
    assert.ok(stopsOfA.length >= 3, 'the ignored STOP was sent again');
    const turn = out.of(A).find((m) => m.payload === 'stopping') as Record<string, unknown>;
    assert.match(String(turn.reason), /^turn over after 0:0[12]; 1 waiting$/);
    assert.ok(out.states(A).includes('queued'), 'A queued again after its turn');
    assert.equal(rt.sim.counters.duplicateStarts, 0, 'no START while the token had a session');
    assert.deepEqual(caught(), []);
  });

  it('priority: a higher priority goes first (msg.priority); with aging a long wait goes first; a higher priority takes the slot of a lower one past minRun', async () => {
    await load(rt.sim, [depot({ limit: 1, aging: 0, minRun: 600 }), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    await delay(500);
    on(C, { priority: 5 });
    await until(() => out.states(C).includes('queued'), 'C queued');
    assert.equal((out.last(C)?.depot as { position: number }).position, 1, 'strict: C first');
    off(A);
    await until(() => out.states(C).includes('charging'), 'C first', 8000);
    assert.equal(startsOf(rt.sim, B), 0);
    off(C);
    await until(() => out.states(B).includes('charging'), 'then B', 8000);
    // Aging: waiting 2 s is worth one level; a priority 1 that asks 3 s after a priority 0 comes second.
    await (async () => {
      const { helper } = await import('../harness');
      await helper.unload();
    })();
    rt.sim.reset();
    await load(rt.sim, [depot({ limit: 1, aging: 2, minRun: 600 }), control(), ...SINKS, CATCH]);
    const aged = new Outputs();
    on(A);
    await until(() => aged.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    await delay(3000);
    on(C, { priority: 1 });
    await until(() => aged.states(C).includes('queued'), 'C queued');
    assert.equal((aged.last(C)?.depot as { position: number }).position, 2, 'B waited longer than one level is worth');
    on(D, { priority: 3 });
    await until(() => aged.states(D).includes('queued'), 'D queued');
    assert.equal((aged.last(D)?.depot as { position: number }).position, 1);
    assert.equal(startsOf(rt.sim, D), 0, 'minRun 600 s: A keeps its slot');
    assert.deepEqual(caught(), []);
  });

  it('preemption: a higher priority waiting takes the slot of a lower one once it has run minRun; the lower one queues again', async () => {
    await load(rt.sim, [depot({ limit: 1, minRun: 1.5 }), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B); // same priority: no preemption, no turns
    on(C, { priority: 2 });
    await until(() => out.states(C).includes('charging'), 'C took the slot', 8000);
    const stop = out.of(A).find((m) => m.payload === 'stopping') as Record<string, unknown>;
    assert.match(String(stop.reason), /^priority 2 is waiting: stopped after 0:0\d; 2 waiting$/);
    await until(() => out.states(A).at(-1) === 'queued', 'A queued again');
    assert.equal(startsOf(rt.sim, B), 0, 'B, same priority as A, waits');
    assert.equal(peak(), 1);
    assert.deepEqual(caught(), []);
  });
});
