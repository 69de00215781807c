/**
 * charging-control across restarts of a real Node-RED process with a
 * localfilesystem context store (#34): no command is repeated, an off that
 * came before the restart is carried out, and a START that may have been on
 * its way when the process was killed is waited for, not sent again.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { delay, startSimulator, until } from '../harness';
import { RedProcess } from '../red-process';

const TARGET = { locationId: 'CR-LOC', evseId: '1', token: 'CR-RFID-1' };
const START_KEY = `${TARGET.token}|${TARGET.locationId}|${TARGET.evseId}`;

describe('charging-control across restarts of a real Node-RED process (localfilesystem store)', function () {
  this.timeout(90_000);
  let sim: ChargingServiceSimulator;
  let red: RedProcess;

  /** Presses an inject node's button, as the editor does. */
  async function press(id: string): Promise<void> {
    const res = await fetch(`http://127.0.0.1:${red.port}/inject/${id}`, { method: 'POST' });
    assert.equal(res.status, 200);
  }
  const states = () => [...red.log.matchAll(/STATE (\w+)/g)].map((m) => m[1]);
  const starts = () => sim.arrivals('START', START_KEY);

  before(async () => {
    sim = await startSimulator({ startDelayMs: 200, stopDelayMs: 200 });
    const inject = (id: string, payload: boolean) => ({ id, type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: String(payload), payloadType: 'bool', repeat: '', once: false, x: 100, y: 100, wires: [['ctl']] });
    const flow = [
      { id: 'tab', type: 'tab', label: 'restart' },
      { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '' },
      inject('on', true),
      inject('off', false),
      { id: 'ctl', type: 'charging-control', z: 'tab', service: 'svc', ...TARGET, guard: 10, checkInterval: 0.3, waitTimeout: 20, contextStore: 'file', x: 300, y: 100, wires: [['log']] },
      { id: 'log', type: 'function', z: 'tab', func: "node.warn('STATE ' + msg.payload + ' ' + msg.reason); return null;", outputs: 1, x: 500, y: 100, wires: [[]] },
    ];
    red = await RedProcess.prepare('charging-control-restart-', flow, "    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem', config: { flushInterval: 1 } } },\n    chargingSession: { minPollIntervalSec: 0.1 },");
  });

  after(async () => {
    await red?.remove();
    await sim?.stop();
  });

  it('clean restarts: a charging session is not started again; an off waiting for the guard is carried out after the restart', async () => {
    await red.start();
    await press('on');
    await until(() => states().includes('charging'), 'charging', 15_000);
    await red.stop();
    let polled = sim.counters.progressQueries;
    await red.start();
    await until(() => sim.counters.progressQueries >= polled + 5, 'five checks after the restart', 15_000);
    assert.equal(starts(), 1, 'no second START');
    assert.deepEqual(states(), [], `the same state as before the restart: no output\n${red.log}`);
    await press('off');
    await until(() => states().includes('guard'), 'guard', 15_000);
    await red.stop();
    assert.equal(sim.counters.stopArrivals, 0, 'stopped inside the guard, before any STOP');
    polled = sim.counters.progressQueries;
    await red.start();
    await until(() => sim.activeSessions() === 0, 'the off carried out after the restart', 20_000);
    assert.equal(sim.counters.stopArrivals, 1);
    assert.equal(starts(), 1);
    await until(() => states().at(-1) === 'idle', 'idle reported', 10_000);
    assert.doesNotMatch(red.log, /\[error\]/);
  });

  it('kill -9 while a START is on its way (delayed 6 s before the station gets it): after the restart the node waits for it and never sends a second START', async () => {
    // Idle from the test above, with the guard of its STOP to wait out first.
    sim.inject({ target: 'post', kind: 'latency', delayMs: 6_000, times: 1 });
    await press('on');
    await until(() => starts() === 2, 'the START at the station door', 15_000);
    await delay(2_500); // past localfilesystem's flush (1 s here): the START is on disk, written before it was sent
    await red.stop('SIGKILL');
    assert.equal(sim.session(TARGET.token), undefined, 'the station has not got it yet');
    await red.start();
    await until(() => sim.session(TARGET.token)?.transactionId !== undefined && states().includes('charging'), 'the delayed START charging, reported', 20_000);
    const polled = sim.counters.progressQueries;
    await until(() => sim.counters.progressQueries >= polled + 5, 'more checks', 10_000);
    assert.equal(starts(), 2, 'no START after the restart');
    assert.equal(sim.counters.duplicateStarts, 0);
    assert.ok(!states().includes('failed'), red.log);
  });
});
