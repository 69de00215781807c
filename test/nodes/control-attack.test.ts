/**
 * charging-control attacked through the real runtime against the simulator:
 * a limit typed the German way, a limit the node cannot read, the dashboard's
 * force-stop pressed for a second session. Commands counted where they land.
 */
import assert from 'node:assert/strict';
import { load, Sink, send, until, delay, runtimeSuite, clientFor, FlowNode, loggedText, statusCalls } from '../harness';

const TARGET = { locationId: 'CA-LOC', evseId: '1', token: 'CA-RFID-1' };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

function control(extra: Record<string, unknown> = {}): FlowNode {
  return { id: 'ctl', type: 'charging-control', service: 'svc', ...TARGET, guard: 0, checkInterval: 0.2, waitTimeout: 0.5, startAttempts: 2, retryInterval: 2, wires: [['out']], ...extra };
}
const outs = () => Sink.of('out').messages;
const states = () => outs().map((m) => m.payload);

describe('charging-control attacked (runtime + simulator, compressed time)', function () {
  this.timeout(30_000);
  // 11 kW: 3 Wh a second, so a limit of a few Wh is reached in seconds.
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const stops = () => rt.sim.counters.stopArrivals;
  /** the driver taps the node's RFID card at the station */
  async function tapAtStation(): Promise<void> {
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', ...TARGET });
    } finally {
      await client.close();
    }
  }

  it('energyLimit typed with a decimal comma ("0,006", as a German user types it): the session is stopped at it, not charged to full', async () => {
    await load(rt.sim, [control({ energyLimit: '0,006' }), ...SINKS, { ...CATCH }]);
    send('ctl', { payload: true });
    // 6 Wh at 3 Wh a second: done within a few seconds, or the limit was ignored (before: charging on, no STOP).
    await until(() => states().at(-1) === 'done', 'done at the limit', 10_000);
    assert.equal(stops(), 1);
  });

  it('an energyLimit the node cannot read ("6 kWh"): said in the log at deploy, not silently no limit', async () => {
    await load(rt.sim, [control({ energyLimit: '6 kWh' }), ...SINKS, CATCH]);
    await until(() => /energy limit/i.test(loggedText()), 'a warning about the energy limit in the log', 3000);
    assert.doesNotMatch(loggedText(), /6 kWh/, 'no value typed in the editor is echoed');
  });

  it('force-stop pressed for a second session started at the station (enforce off): stopped each time', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    send('ctl', { payload: false });
    await until(() => states().at(-1) === 'idle', 'idle');
    for (let n = 1; n <= 2; n++) {
      await tapAtStation();
      await until(() => states().at(-1) === 'charging', `session ${n} reported`, 5000);
      send('ctl', { payload: false, force: true });
      await until(() => stops() === n && rt.sim.activeSessions() === 0, `session ${n} stopped by the press`, 5000);
      await until(() => states().at(-1) === 'idle', 'idle again');
    }
    await delay(300);
    assert.equal(stops(), 2);
  });

  it('msg.restart pressed after failed while the bound on STARTs is full: an output and a badge that say when the next START goes, and no START', async () => {
    rt.sim.inject({ target: 'post', kind: 'ignore-start', times: 100 });
    await load(rt.sim, [control({ retryInterval: 20 }), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'failed', 'failed after two STARTs', 8000);
    assert.equal(rt.sim.counters.startArrivals, 2);
    const before = outs().length;
    await delay(400); // the badge of the failed round is shown
    send('ctl', { payload: true, restart: true }); // the dashboard's restart button
    await until(() => outs().length > before, 'an output answering the press', 3000);
    const answer = outs().at(-1) as Record<string, unknown>;
    assert.equal(answer.payload, 'failed');
    assert.match(String(answer.reason), /^no more than 2 STARTs per 20 s: next START in 0:(1\d|20)$/);
    const badge = () => statusCalls('ctl').map((s) => String(s.text ?? '')).at(-1) ?? '';
    await until(() => /^on → failed next START in 0:(1\d|20)/.test(badge()), `a badge with the next START: ${badge()}`, 3000);
    await delay(600);
    assert.equal(rt.sim.counters.startArrivals, 2, 'the bound holds: no START');
    // The same press again answers again (a press, not a repeated state); still no START.
    const more = outs().length;
    send('ctl', { payload: true, restart: true });
    await until(() => outs().length > more, 'the second press answered', 3000);
    assert.equal(rt.sim.counters.startArrivals, 2);
  });
});
