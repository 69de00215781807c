/**
 * charging-depot's limits through the real runtime against the simulator,
 * time compressed: a full car let go, station sessions counted and never
 * stopped, a lowered limit shed one at a time, the energy limit over the
 * wish's turns, the depot's status node, bad input refused with nothing
 * changed, a redeploy that keeps the queue's order.
 */
import assert from 'node:assert/strict';
import { helper, load, send, until, delay, runtimeSuite, statusCalls, loggedText, Sink, CLIENT_ID, CLIENT_SECRET } from '../harness';
import { caught, commands, control, depot, depotSessions, CATCH, Outputs, SINKS, startsOf, target } from './depot-fixture';

const [A, B, C] = [1, 2, 3].map(target);
const on = (t: typeof A, extra: Record<string, unknown> = {}) => send('ctl', { payload: true, target: t, ...extra });
const STATUS = [{ id: 'ds', type: 'charging-depot-status', depot: 'dep', wires: [['status']] }, { id: 'status', type: 'helper' }];
const statusOuts = () => Sink.of('status').messages;
const runtime = () => (helper as unknown as { _redNodes: { stopFlows(): Promise<void>; startFlows(): Promise<void> } })._redNodes;

describe('charging-depot limits (runtime + simulator, compressed time)', function () {
  this.timeout(60_000);
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const peak = () => rt.sim.peakSessions(depotSessions);

  it('a full car is let go: less than idleKWh over idleWindow stops it (done, with why) and the next one starts', async () => {
    // 10 Wh a second, full at 20 Wh (2 s); under 2 Wh in 1.5 s: full.
    rt.sim.plugIn(A, { powerW: 36_000, needWh: 20, taperWh: 0 });
    await load(rt.sim, [depot({ limit: 1, idleKWh: 0.002, idleWindow: 1.5 }), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    await until(() => out.states(A).includes('done'), 'A done once full', 10_000);
    const done = out.last(A) as Record<string, unknown>;
    assert.equal(done.reason, 'car full or not drawing: 0 kWh in 0:02');
    const stopping = out.of(A).find((m) => m.payload === 'stopping') as Record<string, unknown>;
    assert.match(String(stopping.reason), /^car full or not drawing: 0 kWh in 0:02$/);
    await until(() => out.states(B).includes('charging'), 'B charging in the freed slot', 8000);
    await delay(800);
    assert.equal(startsOf(rt.sim, A), 1, 'done: not started again');
    assert.equal(peak(), 1);
    assert.deepEqual(caught(), []);
  });

  it('a session started at the station counts and is never stopped by the depot; over the limit, a managed session is shed instead', async () => {
    await load(rt.sim, [depot({ limit: 1, minRun: 0.5, overFor: 1 }), control(), ...SINKS, CATCH, ...STATUS]);
    const out = new Outputs();
    send('ctl', { payload: false, target: A }); // A's token is known (its control node wants it off)
    on(B);
    await until(() => out.states(B).includes('charging'), 'B charging', 8000);
    const station = rt.sim.stationStart(A);
    await until(() => out.states(A).includes('charging'), 'the station session reported', 8000);
    assert.match(String(out.last(A)?.reason), /started at the station: not stopped/);
    // 2 of 1: after overFor, the managed session (B) is shed; the driver's (A) is not.
    await until(() => out.of(B).some((m) => m.payload === 'stopping'), 'B shed', 8000);
    assert.equal(out.of(B).find((m) => m.payload === 'stopping')?.reason, 'over the limit: shed');
    await until(() => out.states(B).at(-1) === 'queued', 'B queued again (on is still wanted)', 8000);
    await delay(1500);
    assert.equal(rt.sim.arrivals('STOP', station.transactionId), 0, 'the station session is never stopped');
    assert.ok(rt.sim.session(A.token), 'and charges on');
    send('ds', { topic: 'status' });
    await until(() => statusOuts().length > 0, 'the table');
    const table = statusOuts().at(-1)?.payload as { entries: Array<Record<string, unknown>> };
    const a = table.entries.find((e) => (e.target as typeof A).token === A.token) as Record<string, unknown>;
    assert.equal(a.station, true);
    // The driver ends it: B gets the slot back.
    rt.sim.stationStop(A.token);
    await until(() => out.states(B).filter((s) => s === 'charging').length === 2, 'B charging again', 8000);
    assert.deepEqual(caught(), []);
  });

  it('a lowered limit (msg.limit at run time) is reached by shedding, one per overFor, lowest priority and latest start first', async () => {
    await load(rt.sim, [depot({ limit: 3, minRun: 0.5, overFor: 1 }), control(), ...SINKS, CATCH, ...STATUS]);
    const out = new Outputs();
    on(A, { priority: 1 });
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    await until(() => out.states(B).includes('charging'), 'B charging', 8000);
    on(C);
    await until(() => out.states(C).includes('charging'), 'C charging', 8000);
    send('ds', { limit: 1 });
    await until(() => statusOuts().some((m) => (m.payload as { limit: number }).limit === 1), 'the new limit answered');
    await until(() => rt.sim.activeSessions() === 1, 'shed down to one', 15_000);
    const stops = commands(rt.sim).filter((c) => c.action === 'STOP');
    assert.deepEqual(stops.map((s) => s.token), [C.token, B.token], 'C (priority 0, latest start), then B; A (priority 1) stays');
    assert.ok(stops[1].at - stops[0].at >= 1000, `one per overFor: ${stops[1].at - stops[0].at} ms apart`);
    await delay(1500);
    assert.equal(commands(rt.sim).filter((c) => c.action === 'STOP').length, 2, 'under the limit: no more');
    assert.deepEqual([B, C].map((t) => out.states(t).at(-1)), ['queued', 'queued']);
    assert.equal(rt.sim.session(A.token)?.stoppedAt, null);
    assert.deepEqual(caught(), []);
  });

  it('the energy limit counts the wish\'s total across turns', async () => {
    // 3 Wh a second; turns of 1 s: no single session reaches 10 Wh, the wish's total does.
    await load(rt.sim, [depot({ limit: 1, turn: 1, minRun: 1 }), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A, { energyLimit: 0.01 });
    await until(() => out.states(A).includes('charging'), 'A charging', 8000);
    on(B);
    await until(() => out.states(A).includes('done'), 'A done over its turns', 30_000);
    assert.match(String(out.last(A)?.reason), /^energy limit of 0\.01 kWh reached \(0\.01\d* kWh\)/);
    assert.ok(startsOf(rt.sim, A) >= 2, `A charged in ${startsOf(rt.sim, A)} turns`);
    const longest = Math.max(...rt.sim.sessionLog().filter((s) => s.token === A.token && s.stoppedAt !== null).map((s) => ((s.stoppedAt as number) - s.startedAt) * (11_000 / 3_600_000)));
    assert.ok(longest < 10, `no single session took 10 Wh (the longest ${longest.toFixed(1)} Wh)`);
    assert.equal(peak(), 1);
  });

  it('charging-depot-status: the table on request and on changes (at most one a second), the badge; msg.limit raises the limit at run time; an invalid one changes nothing', async () => {
    await load(rt.sim, [depot({ limit: 1 }), control(), ...SINKS, CATCH, ...STATUS]);
    const out = new Outputs();
    on(A);
    on(B);
    on(C);
    await until(() => out.states(C).includes('queued') && out.states(A).includes('charging'), 'A charging, B and C queued', 8000);
    const before = statusOuts().length;
    send('ds', { topic: 'status' });
    await until(() => statusOuts().length > before, 'the table');
    const t = statusOuts().at(-1)?.payload as { limit: number; inUse: number; waiting: number; entries: Array<Record<string, unknown>> };
    assert.deepEqual([t.limit, t.inUse, t.waiting], [1, 1, 2]);
    assert.deepEqual(t.entries.map((e) => [(e.target as typeof A).token, e.state, e.position, e.kWSource]), [[A.token, 'charging', null, 'assumed'], [B.token, 'queued', 1, 'assumed'], [C.token, 'queued', 2, 'assumed']]);
    assert.match(String(t.entries[0].since), /^\d{4}-\d\d-\d\dT/);
    await until(() => statusCalls('ds').some((s) => s.text === '1/1 in use · 2 waiting'), 'the badge');
    send('ds', { limit: 'two' });
    send('ds', { limit: null, budgetKW: null });
    send('ds', { budgetKW: 5 }); // below assumedKW: no car could start
    await until(() => caught().length === 3, 'three refusals');
    assert.deepEqual(caught().map((e) => e.code), ['INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT']);
    assert.match(caught()[0].message, /msg\.limit must be a whole number of connectors/);
    await delay(500);
    assert.equal(startsOf(rt.sim, B), 0, 'nothing changed');
    const outsBefore = statusOuts().length;
    send('ds', { limit: 3 });
    await until(() => [B, C].every((x) => out.states(x).includes('charging')), 'B and C start under the raised limit', 8000);
    await delay(1500);
    const changes = statusOuts().slice(outsBefore);
    assert.ok(changes.length >= 2, 'the answer and the changes');
    assert.ok(changes.length <= 6, `changes at most once a second: ${changes.length} outputs`);
    assert.equal(peak(), 3);
  });

  it('bad input changes nothing: msg.priority that is no integer (INVALID_INPUT), a depot with neither limit nor budget, control nodes of one depot on two services (CONFIG at deploy, in the log and on the badge)', async () => {
    await load(rt.sim, [depot(), control(), ...SINKS, CATCH]);
    on(A, { priority: 'high' });
    on(A, { priority: 1.5 });
    await until(() => caught().length === 2, 'two refusals');
    assert.deepEqual(caught().map((e) => e.code), ['INVALID_INPUT', 'INVALID_INPUT']);
    assert.match(caught()[0].message, /msg\.priority must be a whole number/);
    assert.equal(rt.sim.requests.length, 0, 'not even a progress query');
    await helper.unload();
    await load(rt.sim, [depot({ limit: '', budgetKW: '' }), control(), ...SINKS, CATCH]);
    await until(() => /neither a limit of connectors nor a kW budget/.test(loggedText()), 'said in the log at deploy');
    await until(() => statusCalls('ctl').some((s) => /^error: config/.test(String(s.text)) && s.fill === 'red'), 'and on the badge');
    on(A);
    await until(() => caught().length === 1, 'the wish refused');
    assert.equal(caught()[0].code, 'CONFIG');
    assert.equal(rt.sim.counters.startArrivals, 0);
    await helper.unload();
    const flow = [depot(), control(), { ...control({ id: 'ctl2', service: 'svc2', wires: [[]] }) }, { id: 'svc2', type: 'charging-service', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl }, ...SINKS, CATCH];
    await load(rt.sim, flow, {}, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }, svc2: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } });
    await until(() => /2 different charging-service configurations/.test(loggedText()), 'said in the log');
    on(A);
    await until(() => caught().length === 1, 'the wish refused');
    assert.equal(caught()[0].code, 'CONFIG');
    assert.equal(rt.sim.counters.startArrivals, 0);
  });

  it('a redeploy keeps the queue\'s order and the charging cars: nobody new starts, then the first in line', async () => {
    await load(rt.sim, [depot({ limit: 2 }), control(), ...SINKS, CATCH]);
    const out = new Outputs();
    on(A);
    on(B);
    await until(() => [A, B].every((t) => out.states(t).includes('charging')), 'A and B charging', 8000);
    on(C);
    await delay(100);
    const D = target(4);
    on(D);
    await until(() => out.states(D).includes('queued'), 'C and D queued');
    await runtime().stopFlows();
    await runtime().startFlows();
    await delay(1500); // five checks after the restart
    assert.deepEqual([A, B, C, D].map((t) => startsOf(rt.sim, t)), [1, 1, 0, 0], 'nothing started again, nobody new');
    send('ctl', { payload: false, target: B });
    await until(() => startsOf(rt.sim, C) === 1 || startsOf(rt.sim, D) === 1, 'one of the queue starts', 8000);
    assert.equal(startsOf(rt.sim, C), 1, 'C, the first in line before the redeploy');
    assert.equal(startsOf(rt.sim, D), 0);
    assert.equal(peak(), 2);
  });
});
