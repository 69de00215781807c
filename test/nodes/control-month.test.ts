/**
 * charging-control as a home-automation flow uses it for weeks, in the real
 * runtime against the simulator with time compressed (small intervals):
 * repeating inputs with the car unplugged, a busy connector, onDelay/offDelay,
 * the energy limit by property and by msg, and two nodes on one connector.
 * Commands are counted where they land (the simulator's arrival counters).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { load, Sink, send, until, delay, runtimeSuite, clientFor, FlowNode, statusCalls, loggedText } from '../harness';

const TARGET = { locationId: 'CM-LOC', evseId: '1', token: 'CM-RFID-1' };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const KEY = `${TARGET.token}|${TARGET.locationId}|${TARGET.evseId}`;

function control(extra: Record<string, unknown> = {}): FlowNode {
  return { id: 'ctl', type: 'charging-control', service: 'svc', ...TARGET, guard: 0, checkInterval: 0.2, waitTimeout: 0.5, startAttempts: 2, retryInterval: 2, wires: [['out']], ...extra };
}
const outs = () => Sink.of('out').messages;
const states = () => outs().map((m) => m.payload);
const caught = () => Sink.of('caught').messages.map((m) => m.error as { code: string; message: string });

describe('charging-control left running (runtime + simulator, compressed time)', function () {
  this.timeout(30_000);
  // 11 kW: 3 Wh a second, so a limit of a few Wh is reached in seconds.
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 100 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const starts = () => rt.sim.arrivals('START', KEY);
  const stops = () => rt.sim.counters.stopArrivals;

  it('"on" every 100 ms with the car unplugged for 3 retry intervals: at most 2 STARTs per interval, no error; plugged in, it charges within retryInterval + waitTimeout', async () => {
    rt.sim.inject({ target: 'post', kind: 'ignore-start', times: Infinity });
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    for (let i = 0; i < 60; i++) {
      send('ctl', { payload: 'on' });
      await delay(100);
    }
    assert.ok(starts() <= 2 * 4, `${starts()} STARTs in 3 retry intervals (was one per repeat once failed)`);
    assert.ok(states().includes('failed'));
    assert.deepEqual(caught(), []);
    rt.sim.clearFaults();
    await until(() => states().at(-1) === 'charging', 'charging once plugged in', 2_000 + 500 + 1_500);
  });

  it('a busy connector: busy, one error to Catch for the episode however often "on" repeats, one START per retry interval', async () => {
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', ...TARGET, token: 'ANOTHER-CARD' });
    } finally {
      await client.close();
    }
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    for (let i = 0; i < 50; i++) {
      send('ctl', { payload: true });
      await delay(100);
    }
    assert.equal(states().at(-1), 'busy');
    assert.ok(starts() >= 2 && starts() <= 3, `${starts()} STARTs in 5 s with a retry interval of 2 s`);
    assert.equal(caught().length, 1, JSON.stringify(caught()));
    assert.equal(caught()[0].code, 'HTTP');
  });

  it('onDelay/offDelay: a flip back within the delay sends nothing; a wish that holds acts after it', async () => {
    await load(rt.sim, [control({ onDelay: 0.8, offDelay: 0.8 }), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await delay(300);
    send('ctl', { payload: false });
    await delay(1200);
    assert.equal(starts(), 0, 'on for 0.3 s only');
    send('ctl', { payload: true });
    await delay(500);
    assert.equal(starts(), 0, 'not before the delay');
    await until(() => states().at(-1) === 'charging', 'charging after the delay', 5000);
    assert.equal(starts(), 1);
    send('ctl', { payload: false });
    await delay(300);
    send('ctl', { payload: true });
    await delay(1200);
    assert.equal(stops(), 0, 'off for 0.3 s only');
    assert.equal(states().at(-1), 'charging');
  });

  it('energy limit by property: stopped at the limit, done, and not started again by a repeated on', async () => {
    await load(rt.sim, [control({ energyLimit: 0.006 }), ...SINKS, CATCH]);
    send('ctl', { payload: true });
    await until(() => states().at(-1) === 'done', 'done', 10_000);
    assert.equal(stops(), 1);
    assert.match(String(outs().at(-1)?.reason), /^energy limit of 0\.006 kWh reached/);
    for (let i = 0; i < 5; i++) send('ctl', { payload: true });
    await delay(3000); // past a retry interval
    assert.equal(starts(), 1);
    assert.deepEqual(caught(), []);
  });

  it('energy limit by msg.energyLimit: done at it; a new limit starts again; an invalid one goes to Catch', async () => {
    await load(rt.sim, [control(), ...SINKS, CATCH]);
    send('ctl', { payload: true, energyLimit: 0.005 });
    await until(() => states().at(-1) === 'done', 'done', 10_000);
    assert.equal(starts(), 1);
    send('ctl', { payload: true, energyLimit: 0.05 });
    await until(() => starts() === 2, 'a new limit starts again', 5000);
    send('ctl', { payload: true, energyLimit: 'lots' });
    await until(() => caught().length === 1, 'the invalid limit at Catch');
    assert.equal(caught()[0].code, 'INVALID_INPUT');
  });

  it('two control nodes on one connector: a warning in the log and on both badges at deploy', async () => {
    await load(rt.sim, [control(), control({ id: 'ctl2', token: 'CM-RFID-2' }), ...SINKS, CATCH]);
    await until(() => (loggedText().match(/controls the same connector/g) ?? []).length >= 2, 'two warnings', 3000);
    for (const id of ['ctl', 'ctl2']) {
      await until(() => statusCalls(id).some((s) => /two control nodes on this connector/.test(String(s.text ?? ''))), `the badge of ${id}`, 3000);
    }
    assert.equal(starts(), 0);
  });

  it('a context store that fails to keep the START: nothing sent, the error at Catch, no attempt used: START 1/2 at the next check once it works', async () => {
    await load(rt.sim, [control({ retryInterval: 60 }), ...SINKS, CATCH]);
    // Node-RED's memory context store itself fails, only for the write that carries the command (the one before the send).
    type Set = (this: unknown, scope: string, key: unknown, value: unknown, cb?: (err?: Error) => void) => void;
    const runtime = path.dirname(require.resolve(process.env.CHARGING_NODE_RED ?? 'node-red'));
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const memory = require(require.resolve('@node-red/runtime/lib/nodes/context/memory', { paths: [runtime] })) as (c: unknown) => object;
    const proto = Object.getPrototypeOf(memory({})) as { set: Set };
    const real = proto.set;
    let failing = true;
    proto.set = function (scope, key, value, cb) {
      if (failing && JSON.stringify(value ?? null).includes('"command":{')) return cb?.(new Error('disk full'));
      return real.call(this, scope, key, value, cb);
    };
    try {
      send('ctl', { payload: true });
      await until(() => caught().length === 1, 'the failure at Catch');
      assert.equal(caught()[0].code, 'CONFIG');
      assert.match(caught()[0].message, /disk full/);
      await delay(600); // three checks, still failing
      assert.equal(starts(), 0);
      failing = false;
      await until(() => states().at(-1) === 'charging', 'charging once the store works', 5000);
      assert.equal(starts(), 1);
      assert.ok(outs().some((m) => /^START 1\/2 sent/.test(String(m.reason))), outs().map((m) => m.reason).join(' | '));
    } finally {
      proto.set = real;
    }
  });
});
