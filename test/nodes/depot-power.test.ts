/**
 * A depot's kW budget through the real runtime against the simulator: a
 * session counts assumedKW until its power is measured (two meter readings
 * at least 10 s apart), then what it draws; the next car starts when its
 * assumed kW fit, and never before. Real seconds: the 10 s are the contract.
 */
import assert from 'node:assert/strict';
import { load, send, until, delay, runtimeSuite, Sink } from '../harness';
import { caught, control, depot, depotSessions, CATCH, Outputs, SINKS, startsOf, target } from './depot-fixture';

const [A, B, C] = [1, 2, 3].map(target);
const on = (t: typeof A) => send('ctl', { payload: true, target: t });

describe('charging-depot kW budget (runtime + simulator)', function () {
  this.timeout(60_000);
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });

  it('budget 20 kW, assumed 11, cars drawing 7.2 kW: the second starts once the first is measured, the third never fits', async () => {
    for (const t of [A, B, C]) rt.sim.plugIn(t, { powerW: 7_200 });
    await load(rt.sim, [depot({ limit: '', budgetKW: 20, assumedKW: 11 }), control({ checkInterval: 1 }), ...SINKS, CATCH, { id: 'ds', type: 'charging-depot-status', depot: 'dep', wires: [['status']] }, { id: 'status', type: 'helper' }]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    const aCharging = performance.now();
    on(B);
    on(C);
    await until(() => out.states(C).includes('queued'), 'B and C queued');
    assert.match(String(out.last(B)?.reason), /^waiting for a slot: 11 of 20 kW, 1 charging, 1st of [12]$/);
    await until(() => out.states(B).includes('starting'), 'B starts once A is measured', 20_000);
    const waited = performance.now() - aCharging;
    assert.ok(waited >= 9_000, `B waited ${Math.round(waited)} ms: A counted 11 kW until two readings 10 s apart`);
    await until(() => out.states(B).includes('charging'), 'B charging', 8000);
    await delay(14_000); // B measured too: 7.2 + 7.2 + 11 > 20
    assert.equal(startsOf(rt.sim, C), 0, 'C never fits');
    send('ds', { topic: 'status' });
    await until(() => Sink.of('status').messages.length > 0, 'the table');
    const t = Sink.of('status').messages.at(-1)?.payload as { usedKW: number; entries: Array<{ kW: number; kWSource: string; state: string }> };
    assert.deepEqual(t.entries.map((e) => e.kWSource), ['measured', 'measured', 'assumed']);
    for (const e of t.entries.slice(0, 2)) assert.ok(Math.abs(e.kW - 7.2) < 0.3, `measured ${e.kW} kW`);
    assert.ok(Math.abs(t.usedKW - 14.4) < 0.5);
    assert.equal(rt.sim.peakSessions(depotSessions), 2);
    assert.deepEqual(caught(), []);
  });

  it('budget 34 kW, assumed 11, cars drawing 22 kW: the second car is shed once measured, and asks again at what it drew, not at 11 kW (no START and shed over and over)', async () => {
    for (const t of [A, B]) rt.sim.plugIn(t, { powerW: 22_000 });
    await load(rt.sim, [depot({ limit: '', budgetKW: 34, assumedKW: 11, minRun: 1, overFor: 1 }), control({ checkInterval: 1 }), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    await delay(12_000); // A measured: 22 kW
    on(B); // 22 + 11 assumed fits 34: B starts, draws 22, the depot is over and sheds it
    await until(() => out.of(B).some((m) => m.reason === 'over the limit: shed'), 'B shed once measured', 25_000);
    await until(() => out.states(B).at(-1) === 'queued' || startsOf(rt.sim, B) > 1, 'B queued again, or started again', 8000);
    await delay(3_000); // three checks more
    assert.equal(startsOf(rt.sim, B), 1, `B started ${startsOf(rt.sim, B)} times (${out.of(B).map((m) => `${String(m.payload)}: ${String(m.reason)} ${JSON.stringify(m.depot)}`).join("\n")}): a car shed for what it drew asks again at what it drew (22 + 22 > 34)`);
    assert.match(String(out.last(B)?.reason), /^waiting for a slot: 2\d\.?\d* of 34 kW, 1 charging, 1st of 1$/);
    assert.equal(startsOf(rt.sim, A), 1, 'A charges on');
    assert.deepEqual(caught(), []);
  });
});
