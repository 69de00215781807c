/**
 * charging-control (#34) through the real runtime against the simulator: the
 * wish in, START or STOP only on a difference, the guard, the retries, the
 * driver's end, errors to Catch with nothing sent. Short guard and intervals
 * (settings chargingSession.minPollIntervalSec lowers the check floor).
 */
import assert from 'node:assert/strict';
import { helper, load, Sink, send, until, delay, runtimeSuite, clientFor, FlowNode, statusCalls, CLIENT_ID } from '../harness';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../simulator/simulator';

const TARGET = { locationId: 'CT-LOC', evseId: '1', token: 'CT-RFID-1' };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const keyOf = (t: typeof TARGET) => `${t.token}|${t.locationId}|${t.evseId}`;

function control(extra: Record<string, unknown> = {}): FlowNode {
  return { id: 'ctl', type: 'charging-control', service: 'svc', ...TARGET, guard: 0, checkInterval: 0.3, waitTimeout: 1, startAttempts: 2, wires: [['out']], ...extra };
}
const outs = () => Sink.of('out').messages;
const states = () => outs().map((m) => m.payload);
const caught = () => Sink.of('caught').messages.map((m) => m.error as { code: string; message: string });
const badges = () => statusCalls('ctl').map((s) => String(s.text ?? ''));
/** The badge is coalesced (four a second at most): wait until one matching it has been shown. */
const badgeShown = (re: RegExp) => until(() => badges().some((b) => re.test(b)), `a badge ${re}: ${badges().join(' | ')}`, 3000);

/** A session on the target started outside the node (at the station), charging. */
async function startedElsewhere(sim: ChargingServiceSimulator, t = TARGET): Promise<string> {
  const client = clientFor(sim);
  try {
    await client.sendCommand({ action: 'START', ...t });
  } finally {
    await client.close();
  }
  await until(() => (sim.session(t.token)?.startedAt ?? Infinity) <= Date.now(), 'the session charging');
  return sim.session(t.token)?.transactionId as string;
}

async function stoppedAtStation(sim: ChargingServiceSimulator, t = TARGET): Promise<void> {
  const client = clientFor(sim);
  try {
    await client.sendCommand({ action: 'STOP', ...t, transactionId: sim.session(t.token)?.transactionId });
  } finally {
    await client.close();
  }
  await until(() => sim.session(t.token) === undefined, 'the session gone');
}

describe('charging-control (runtime + simulator)', function () {
  this.timeout(30_000);
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const starts = (t = TARGET) => rt.sim.arrivals('START', keyOf(t));
  const stops = () => rt.sim.counters.stopArrivals;
  const runtime = () => (helper as unknown as { _redNodes: { stopFlows(): Promise<void>; startFlows(): Promise<void> } })._redNodes;

  it('repeated on sends one START; it reports starting, then charging, each once', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    for (const payload of [true, 'on', 1, 'START', 'On']) send('ctl', { payload });
    await until(() => states().includes('charging'), 'charging', 8000);
    for (const payload of ['on', true]) send('ctl', { payload });
    await delay(800); // several checks
    assert.equal(starts(), 1);
    assert.deepEqual(states(), ['starting', 'charging']);
    const last = outs().at(-1) as Record<string, unknown>;
    assert.equal(last.wanted, true);
    assert.deepEqual(last.target, TARGET);
    assert.equal(last.topic, TARGET.token);
    assert.match(String((last.session as { transactionId: string }).transactionId), /^TX-/);
    assert.match(String(last.reason), /charging \(transaction TX-/);
    await badgeShown(/^on → charging \d+ Wh/);
    assert.deepEqual(caught(), []);
  });

  it('on while the car already charges sends nothing; off stops it once, and the badge says so', async () => {
    const tx = await startedElsewhere(rt.sim);
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().length === 1, 'a state');
    await delay(500);
    assert.deepEqual(states(), ['charging']);
    assert.equal(starts(), 1, 'only the START made before');
    send('ctl', { payload: 'OFF' });
    await until(() => states().at(-1) === 'idle', 'idle', 8000);
    assert.equal(rt.sim.arrivals('STOP', tx), 1);
    assert.deepEqual(states(), ['charging', 'stopping', 'idle']);
    assert.equal(outs().at(-1)?.wanted, false);
    await badgeShown(/^off → stopping 1\/3/);
    await badgeShown(/^off → idle/);
  });

  it('input errors go to Catch and nothing is sent: a payload that is no wish, a missing target, no configuration, refused credentials', async () => {
    await load(rt.sim, [control({ locationId: '', evseId: '', token: '' }), { id: 'lost', type: 'charging-control', wires: [[]] }, ...SINKS, CATCH]);
    send('ctl', { payload: 'maybe', target: TARGET });
    send('ctl', { payload: { on: true }, target: TARGET });
    send('ctl', { payload: true, target: { token: 'X' } });
    send('lost', { payload: true });
    await until(() => caught().length === 4, 'four errors');
    const byCode = caught().map((e) => e.code).sort();
    assert.deepEqual(byCode, ['CONFIG', 'INVALID_INPUT', 'INVALID_INPUT', 'MISSING_FIELD']);
    assert.match(caught().find((e) => e.code === 'MISSING_FIELD')?.message ?? '', /locationId .*msg\.target\.locationId/);
    assert.match(caught().find((e) => e.code === 'INVALID_INPUT')?.message ?? '', /true\/false, "on"\/"off", 1\/0 or "START"\/"STOP"/);
    assert.equal(rt.sim.requests.length, 0, 'not even a progress query');
    assert.deepEqual(outs(), []);
    await helper.unload();
    await load(rt.sim, [control(), ...SINKS, CATCH], {}, { svc: { clientId: CLIENT_ID, clientSecret: 'wrong' } });
    send('ctl', { payload: true });
    await until(() => caught().length === 1, 'the refusal');
    assert.equal(caught()[0].code, 'AUTH');
    assert.equal(rt.sim.counters.startArrivals, 0);
    assert.deepEqual(outs(), []);
  });

  it('guard: an off inside it waits (output guard, the badge counts down), then the latest wish wins; msg.force stops at once', async () => {
    await load(rt.sim, [control({ guard: 2 }), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().includes('charging'), 'charging', 8000);
    send('ctl', { payload: false });
    await until(() => states().includes('guard'), 'guard');
    const guard = outs().find((m) => m.payload === 'guard') as Record<string, unknown>;
    assert.match(String(guard.reason), /^STOP in 0:0[12]: guard of 2 s after the last START \(msg\.force stops at once\)$/);
    await badgeShown(/^off → guard 0:0[12]$/);
    await delay(500);
    assert.equal(stops(), 0, 'no STOP inside the guard');
    send('ctl', { payload: true }); // the latest wish wins: on again, nothing to do
    await until(() => states().at(-1) === 'charging', 'charging again');
    send('ctl', { payload: false });
    await until(() => stops() === 1, 'the STOP after the guard', 8000);
    await until(() => states().at(-1) === 'idle', 'idle', 8000);
    // A START after that STOP waits for the guard; off with force stops at once, guard or not.
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'guard', 'guard before the START');
    assert.match(String(outs().at(-1)?.reason), /^START in 0:0[12]: guard of 2 s after the last STOP$/);
    await until(() => states().at(-1) === 'charging', 'charging', 8000);
    send('ctl', { payload: false, force: true });
    await until(() => stops() === 2, 'the forced STOP', 1500);
    assert.equal(starts(), 2);
    assert.deepEqual(caught(), []);
  });

  it('a flapping wish (on/off every 150 ms for 3.6 s) sends at most one command per guard period of 1.2 s, and the last wish is carried out', async () => {
    await load(rt.sim, [control({ guard: 1.2 }), ...SINKS, CATCH]);
    for (let i = 0; i < 24; i++) {
      send('ctl', { payload: i % 2 === 0 });
      await delay(150);
    }
    // The last wish was off: it is carried out within a guard period.
    await until(() => states().at(-1) === 'idle' && rt.sim.activeSessions() === 0, 'the last wish (off) carried out', 8000);
    const commands = rt.sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).map((r) => ({ action: (JSON.parse(r.body) as { action: string }).action, at: r.at }));
    // Without the guard: a START and a STOP for every on and off that met a session.
    assert.ok(commands.length >= 2 && commands.length <= 4, `commands: ${commands.map((c) => c.action).join(', ')}`);
    for (let i = 1; i < commands.length; i++) {
      assert.notEqual(commands[i].action, commands[i - 1].action, 'START and STOP alternate');
      // Sent at least 1.2 s apart by the node's clock; the arrivals may be a little closer.
      assert.ok(commands[i].at - commands[i - 1].at >= 900, `${commands[i - 1].action} then ${commands[i].action} after ${commands[i].at - commands[i - 1].at} ms`);
    }
    assert.equal(rt.sim.counters.duplicateStarts, 0);
    assert.deepEqual(caught(), []);
  });

  it('ignore-stop: the STOP the station ignored is sent again, and the session ends (2 STOPs)', async () => {
    const tx = await startedElsewhere(rt.sim);
    await load(rt.sim, [control({ waitTimeout: 0.5 }), ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 1 });
    send('ctl', { payload: false });
    await until(() => states().at(-1) === 'idle', 'idle', 8000);
    assert.equal(rt.sim.arrivals('STOP', tx), 2);
    await badgeShown(/^off → stopping 2\/3/);
    assert.deepEqual(caught(), []);
  });

  it('a station that ignores every STOP: failed after 3 STOPs with NOT_STOPPED at Catch, and a new round a check later', async () => {
    const tx = await startedElsewhere(rt.sim);
    await load(rt.sim, [control({ waitTimeout: 0.3, checkInterval: 0.5 }), ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 100 });
    send('ctl', { payload: false });
    await until(() => states().includes('failed'), 'failed', 8000);
    assert.equal(rt.sim.arrivals('STOP', tx), 3);
    const failed = outs().find((m) => m.payload === 'failed') as Record<string, unknown>;
    assert.match(String(failed.reason), /^still charging after 3 STOPs \(transaction TX-\w+\): the station does not stop; STOP again in 0\.5 s$/);
    await until(() => caught().length === 1, 'NOT_STOPPED');
    assert.equal(caught()[0].code, 'NOT_STOPPED');
    await until(() => rt.sim.arrivals('STOP', tx) >= 4, 'a new round', 5000);
    rt.sim.clearFaults();
    await until(() => states().at(-1) === 'idle', 'idle once the station stops', 8000);
  });

  it('ignore-start: a START that brought no session is sent again after a query shows none; both ignored: failed; the same on again sends nothing; the retry interval tries again by itself', async () => {
    await load(rt.sim, [control({ waitTimeout: 0.5, retryInterval: 2 }), ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'ignore-start', times: 3 });
    send('ctl', { payload: 'on' });
    await until(() => states().at(-1) === 'failed', 'failed', 8000);
    assert.equal(starts(), 2, 'startAttempts 2');
    const failed = outs().at(-1) as Record<string, unknown>;
    assert.match(String(failed.reason), /^no session after START — is the car plugged in\?; next round in 0:0\d$/);
    await badgeShown(/^on → starting 2\/2/);
    for (let i = 0; i < 5; i++) send('ctl', { payload: 'on' }); // the same value, as MQTT repeats it: nothing
    await delay(700);
    assert.equal(starts(), 2, 'failed stays failed until the retry interval');
    await until(() => states().at(-1) === 'charging', 'charging after the retry (one more ignored, then one that works)', 8000);
    assert.equal(starts(), 4);
    // Each START after the first followed a query that found no session.
    const posts = rt.sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH);
    for (const p of posts.slice(1)) {
      const before = rt.sim.requests.slice(0, rt.sim.requests.indexOf(p)).filter((r) => r.method === 'GET');
      assert.ok(before.length > 0);
    }
    assert.equal(rt.sim.counters.duplicateStarts, 0);
    assert.deepEqual(caught(), []);
  });

  it('a START whose answer is lost after the station acted (OUTCOME_UNKNOWN) is not sent again: progress shows the session', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'charging', 'charging', 8000);
    await delay(1200); // past the wait: no second START
    assert.equal(starts(), 1);
    assert.deepEqual(caught(), []);
  });

  it('never fights the driver: a session stopped at the station is not started again until off then on, or on with msg.restart', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'charging', 'charging', 8000);
    await stoppedAtStation(rt.sim);
    await until(() => states().at(-1) === 'idle', 'idle');
    assert.equal(outs().at(-1)?.reason, 'ended at the station');
    await badgeShown(/^on → idle \(ended at the station\)/);
    send('ctl', { payload: true }); // the same value: nothing
    await delay(1000); // three checks
    assert.equal(starts(), 1);
    send('ctl', { payload: true, restart: true });
    await until(() => states().at(-1) === 'charging', 'charging again', 8000);
    assert.equal(starts(), 2);
    await stoppedAtStation(rt.sim);
    await until(() => states().at(-1) === 'idle', 'idle');
    await delay(1000); // three checks: the end at the station is not fought
    assert.equal(starts(), 2);
    // restart pressed again after this new end: a press, not a repeated state (test/lib/control/attack.test.ts)
    send('ctl', { payload: true, restart: true });
    await until(() => starts() === 3 && states().at(-1) === 'charging', 'the second press starts again', 8000);
    send('ctl', { payload: false, force: true });
    await until(() => states().at(-1) === 'idle', 'stopped');
    send('ctl', { payload: true });
    await until(() => starts() === 4, 'on after off starts');
  });

  it('a session started at the station while off is wanted is reported, not stopped; with enforce it is stopped', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    send('ctl', { payload: false });
    await until(() => states().at(-1) === 'idle', 'idle');
    await startedElsewhere(rt.sim);
    await until(() => states().at(-1) === 'charging', 'reported');
    assert.match(String(outs().at(-1)?.reason), /started at the station: not stopped \(enforce is off\)/);
    await delay(700);
    assert.equal(stops(), 0);
    await helper.unload();
    await load(rt.sim, [control({ id: 'ctl', enforce: true }), ...SINKS, CATCH]);
    send('ctl', { payload: false });
    await until(() => stops() === 1 && rt.sim.activeSessions() === 0, 'stopped', 8000);
  });

  it('one node for several connectors from msg.target: each kept on its own', async () => {
    const other = { locationId: 'CT-LOC', evseId: '2', token: 'CT-RFID-2' };
    await load(rt.sim, [control({ locationId: '', evseId: '', token: '' }), ...SINKS, CATCH]);
    send('ctl', { payload: true, target: TARGET });
    send('ctl', { payload: true, target: other });
    await until(() => outs().filter((m) => m.payload === 'charging').length === 2, 'both charging', 8000);
    send('ctl', { payload: false, target: other });
    await until(() => rt.sim.activeSessions() === 1, 'one stopped', 8000);
    assert.ok(rt.sim.session(TARGET.token));
    assert.equal(starts(TARGET) + starts(other), 2);
    await badgeShown(/^2 connectors · CT-RFID-2: off → (stopping|idle)/);
  });

  it('a redeploy neither repeats a command nor forgets an off waiting for the guard; after close no timer runs', async () => {
    await load(rt.sim, [control({ guard: 1.5 }), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'charging', 'charging', 8000);
    send('ctl', { payload: false });
    await until(() => states().at(-1) === 'guard', 'guard');
    await runtime().stopFlows();
    const polls = rt.sim.counters.progressQueries;
    await delay(600);
    assert.equal(rt.sim.counters.progressQueries, polls, 'nothing polls while the flows are stopped');
    await runtime().startFlows();
    await until(() => rt.sim.activeSessions() === 0, 'the off carried out after the redeploy', 8000);
    assert.equal(starts(), 1);
    assert.equal(stops(), 1);
    await helper.unload();
    const after = rt.sim.counters.progressQueries;
    await delay(800);
    assert.equal(rt.sim.counters.progressQueries, after, 'no check after close');
  });
});
