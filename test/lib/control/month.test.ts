/**
 * charging-control left running for weeks, on a fake clock against the real
 * simulator with the node's defaults (check 30 s, wait 60 s, 2 STARTs, retry
 * 600 s): repeating inputs, an unplugged car, a busy connector, a session
 * pending forever, an outage and flapping never hammer the service. Every
 * command is counted where it lands (the simulator's arrival counters).
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import type { ControlSettings } from '../../../nodes/lib/control/memory';
import { MemoryControlStore } from '../../../nodes/lib/control/store';
import type { ChargingError } from '../../../nodes/lib/errors';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator } from '../../harness';
import { FakeClock } from './fake-clock';

const T = { locationId: 'MO-LOC', evseId: '1', token: 'MO-RFID-1' };
const KEY = `${T.token}|${T.locationId}|${T.evseId}`;
/** charging-control's defaults, guard aside (0: the cases here are about STARTs, not the guard) */
const DEFAULTS: ControlSettings = {
  guardMs: 0, checkMs: 30_000, confirmMs: 2_000, waitMs: 60_000, startAttempts: 2, stopAttempts: 3, enforce: false,
  retryMs: 600_000, onDelayMs: 0, offDelayMs: 0, energyLimitKWh: null,
};

interface Rig {
  book: ControlBook;
  clock: FakeClock;
  outputs: ControlSnapshot[];
  /** failures of timer checks (what goes to Catch with nobody waiting) */
  errors: ChargingError[];
}

describe('charging-control left running: repeats, unplugged car, busy connector, pending, outage, flapping (fake clock, simulator)', function () {
  this.timeout(60_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  const rigs: Rig[] = [];
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0 });
    // The client's own pauses between retries are real time: short, so that an outage costs no seconds.
    client = clientFor(sim, { timeoutMs: 2000, retry: { baseDelayMs: 5, maxDelayMs: 10 } });
  });
  afterEach(async () => {
    for (const r of rigs.splice(0)) r.book.close();
    await client.close();
    await sim.stop();
  });

  function rig(settings: Partial<ControlSettings> = {}, extra: Partial<ControlDeps> = {}, c = client): Rig {
    const r = { clock: new FakeClock(), outputs: [] as ControlSnapshot[], errors: [] as ChargingError[] } as Rig;
    const deps: ControlDeps = {
      poll: (t, priority) => c.getProgress(t.token, { priority }).then((res) => res.record),
      send: (cmd) => c.sendCommand(cmd),
      store: new MemoryControlStore(),
      clock: r.clock,
      track: r.clock.track,
      onState: (s, changed) => changed && r.outputs.push(s),
      onError: (_t, err) => r.errors.push(err),
      ...extra,
    };
    r.book = new ControlBook({ ...DEFAULTS, ...settings }, deps);
    rigs.push(r);
    return r;
  }
  const starts = (s = sim) => s.arrivals('START', KEY);
  const states = (r: Rig) => r.outputs.map((o) => o.state);
  /** the same wish every 10 s (an MQTT publisher), for ms */
  async function repeat(r: Rig, wanted: boolean, ms: number): Promise<Array<ChargingError | undefined>> {
    const answers: Array<ChargingError | undefined> = [];
    for (let t = 0; t < ms; t += 10_000) {
      answers.push(await r.book.want(T, wanted));
      await r.clock.advance(10_000);
    }
    return answers;
  }

  it('"on" every 10 s with the car unplugged for 30 min: 2 STARTs per 600 s, no error; plugged in, it charges within retryInterval + waitTimeout', async () => {
    sim.inject({ target: 'post', kind: 'ignore-start', times: Infinity });
    const r = rig();
    await repeat(r, true, 1_800_000);
    assert.ok(starts() <= 6, `${starts()} STARTs in 30 min`);
    assert.ok(starts() >= 4, `${starts()} STARTs in 30 min: the timed retry runs`);
    assert.deepEqual(r.errors, []);
    assert.ok(states(r).includes('failed'));
    sim.clearFaults();
    await repeat(r, true, DEFAULTS.retryMs + DEFAULTS.waitMs);
    assert.equal(states(r).at(-1), 'charging');
  });

  it('a busy connector (409): state busy, one error for the episode, one START per retryInterval; charging within retryInterval + waitTimeout after it frees', async () => {
    await client.sendCommand({ action: 'START', ...T, token: 'SOMEONE-ELSE' });
    const r = rig();
    const answers = await repeat(r, true, 900_000);
    assert.equal(starts(), 2, '0 s and the retry at 600 s');
    assert.equal(states(r).at(-1), 'busy');
    assert.equal(answers.filter(Boolean).length + r.errors.length, 1, 'one error for the busy episode');
    assert.equal(answers[0]?.statusCode, 409);
    await client.sendCommand({ action: 'STOP', ...T, token: 'SOMEONE-ELSE', transactionId: sim.session('SOMEONE-ELSE')?.transactionId });
    await repeat(r, true, DEFAULTS.retryMs + DEFAULTS.waitMs);
    assert.equal(states(r).at(-1), 'charging');
    assert.equal(starts(), 3);
  });

  it('a session pending forever: failed after waitTimeout, one START, and at most one query per check interval after it', async () => {
    const stuck = await startSimulator({ startDelayMs: 1e12, stopDelayMs: 0 });
    const c = clientFor(stuck, { timeoutMs: 2000 });
    try {
      const r = rig({}, {}, c);
      await r.book.want(T, true);
      await r.clock.advance(3_600_000);
      assert.equal(starts(stuck), 1);
      assert.ok(states(r).includes('failed'), states(r).join());
      const polls = stuck.counters.progressQueries;
      assert.ok(polls <= 31 + 120 + 2, `${polls} queries in an hour (was 1 801)`);
    } finally {
      await c.close();
      await stuck.stop();
    }
  });

  it('a 10-minute outage (503) with an off in it: queries back off to 10 × checkInterval, one error for the outage, the STOP within one backed-off interval after it', async () => {
    const r = rig();
    await r.book.want(T, true);
    await r.clock.advance(10_000);
    assert.equal(states(r).at(-1), 'charging');
    sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
    const before = sim.counters.progressQueries;
    await r.clock.advance(60_000);
    const offAnswer = await r.book.want(T, false);
    await r.clock.advance(540_000);
    const polls = sim.counters.progressQueries - before;
    // 30, 60, 120, 240, 300, 300 s apart, and the off's own query (each retried by the client within its budget)
    assert.ok(polls <= 3 * 8, `${polls} queries in 10 min (was 301)`);
    assert.equal(sim.counters.stopArrivals, 0);
    assert.equal(r.errors.length + (offAnswer ? 1 : 0), 1, [offAnswer, ...r.errors].map((e) => e?.message).join(' | '));
    sim.clearFaults();
    await r.clock.advance(10 * DEFAULTS.checkMs + DEFAULTS.confirmMs);
    assert.equal(sim.counters.stopArrivals, 1);
    assert.equal(states(r).at(-1), 'idle');
  });

  it('on/off flapping every 30 s with the car unplugged: at most 2 STARTs per 600 s', async () => {
    sim.inject({ target: 'post', kind: 'ignore-start', times: Infinity });
    const r = rig();
    for (let i = 0; i < 40; i++) {
      await r.book.want(T, i % 2 === 0);
      await r.clock.advance(30_000);
    }
    assert.ok(starts() <= 4, `${starts()} STARTs in 20 min`);
  });

  it('a store that fails to keep the START: not sent, and no attempt used: sent at the next check once the store works', async () => {
    const store = new MemoryControlStore();
    let fail = false;
    const save = store.save.bind(store);
    store.save = (k, v) => (fail && v?.command ? Promise.reject(new Error('disk full')) : save(k, v));
    const r = rig({}, { store });
    fail = true;
    const err = await r.book.want(T, true);
    assert.match(String(err?.message), /disk full/);
    assert.equal(starts(), 0);
    fail = false;
    await r.clock.advance(DEFAULTS.checkMs);
    assert.equal(starts(), 1, 'sent at the next check, not after waitTimeout');
    assert.ok(r.outputs.some((o) => o.reason.startsWith('START 1/2')), r.outputs.map((o) => o.reason).join(' | '));
  });

  it('a wish that comes while a START is on its way: the output describes the new wish, never the old decision', async () => {
    let release: (() => void) | null = null;
    const r = rig({}, {
      send: async (cmd) => {
        if (cmd.action === 'START') await new Promise<void>((res) => (release = res));
        return client.sendCommand(cmd);
      },
    });
    const first = r.book.want(T, true);
    for (let i = 0; i < 200 && !release; i++) await new Promise((res) => setTimeout(res, 10));
    assert.ok(release, 'the START on its way');
    const second = r.book.want(T, false);
    (release as () => void)();
    await Promise.all([first, second]);
    await r.clock.settle();
    const stale = r.outputs.filter((o) => o.wanted === false && /START \d\/\d sent$/.test(o.reason));
    assert.deepEqual(stale, []);
    assert.equal(r.outputs.at(-1)?.wanted, false);
  });
});
