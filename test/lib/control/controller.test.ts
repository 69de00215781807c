/**
 * charging-control's controller on a fake clock, against the real simulator
 * through a real ServiceClient: the guard, the waits and the checks run on
 * fake time (a minute of flapping costs a few requests, no minute), every
 * request is real HTTP.
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import { emptyMemory, toKept, type ControlSettings, type KeptTarget } from '../../../nodes/lib/control/memory';
import { NO_SESSION_AFTER_START, OTHER_SENDER } from '../../../nodes/lib/control/reconcile';
import { MemoryControlStore } from '../../../nodes/lib/control/store';
import { targetKey } from '../../../nodes/lib/control/view';
import type { ChargingError } from '../../../nodes/lib/errors';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator, until } from '../../harness';
import { FakeClock } from './fake-clock';
import { controlSettings } from './settings';

const T = { locationId: 'FC-LOC', evseId: '1', token: 'FC-RFID-1' };
const SETTINGS = controlSettings();

interface Rig {
  book: ControlBook;
  clock: FakeClock;
  store: MemoryControlStore;
  outputs: ControlSnapshot[];
  errors: ChargingError[];
  /** fake time of each command sent */
  sent: Array<{ action: string; at: number }>;
}

describe('charging-control controller (fake clock, real simulator)', function () {
  this.timeout(30_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0 });
    client = clientFor(sim, { timeoutMs: 2000 });
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  function rig(settings: Partial<ControlSettings> = {}, extra: Partial<ControlDeps> = {}, store = new MemoryControlStore(), clock = new FakeClock()): Rig {
    const r = { clock, store, outputs: [] as ControlSnapshot[], errors: [] as ChargingError[], sent: [] as Array<{ action: string; at: number }> } as Rig;
    const deps: ControlDeps = {
      poll: (t, priority) => client.getProgress(t.token, { priority }).then((res) => res.record),
      send: (c) => {
        r.sent.push({ action: c.action, at: clock.now() });
        return client.sendCommand(c);
      },
      store,
      clock,
      track: clock.track,
      onState: (s, changed) => changed && r.outputs.push(s),
      onError: (_t, err) => r.errors.push(err),
      ...extra,
    };
    r.book = new ControlBook({ ...SETTINGS, ...settings }, deps);
    return r;
  }
  const states = (r: Rig) => r.outputs.map((o) => o.state);
  const commands = () => sim.requests.filter((q) => q.method === 'POST' && q.path === SESSIONS_PATH).map((q) => (JSON.parse(q.body) as { action: string }).action);

  it('a minute of on/off every 2 s under the default guard (300 s): one START, then one STOP when the guard ends, at its very end', async () => {
    const r = rig();
    for (let i = 0; i < 30; i++) {
      await r.book.want(T, i % 2 === 0);
      await r.clock.advance(2_000);
    }
    assert.deepEqual(commands(), ['START']);
    assert.equal(states(r).at(-1), 'guard');
    // The last wish (off) came 58 s after the START: 242 s of the guard left.
    assert.match(r.outputs.at(-1)?.reason ?? '', /^STOP in 4:02: guard of 300 s after the last START/);
    await r.clock.advance(300_000);
    assert.deepEqual(commands(), ['START', 'STOP']);
    assert.equal(r.sent[1].at - r.sent[0].at, 300_000, 'the STOP at the end of the guard, not before');
    assert.equal(states(r).at(-1), 'idle');
    // Wishes every 2 s for another ten minutes: never more than one command per guard period.
    for (let i = 0; i < 300; i++) {
      await r.book.want(T, i % 2 === 0);
      await r.clock.advance(2_000);
    }
    for (let i = 1; i < r.sent.length; i++) assert.ok(r.sent[i].at - r.sent[i - 1].at >= 300_000, JSON.stringify(r.sent));
    assert.ok(r.sent.length >= 3 && r.sent.length <= 4, JSON.stringify(r.sent));
    assert.equal(sim.counters.duplicateStarts + sim.counters.duplicateStops, 0);
    r.book.close();
  });

  it('a START that brings no session: sent again only after the wait and a query that shows none; failed after startAttempts', async () => {
    const r = rig({ startAttempts: 3 });
    sim.inject({ target: 'post', kind: 'ignore-start', times: 5 });
    await r.book.want(T, true);
    await r.clock.advance(59_000);
    assert.equal(sim.counters.startArrivals, 1, 'not before the wait');
    const gets = sim.counters.progressQueries;
    await r.clock.advance(1_000);
    assert.equal(sim.counters.startArrivals, 2);
    assert.ok(sim.counters.progressQueries > gets, 'a query first');
    await r.clock.advance(60_000);
    assert.equal(sim.counters.startArrivals, 3);
    await r.clock.advance(120_000);
    assert.equal(sim.counters.startArrivals, 3, 'startAttempts 3');
    assert.equal(states(r).at(-1), 'failed');
    assert.ok(r.outputs.at(-1)?.reason.startsWith(NO_SESSION_AFTER_START), r.outputs.at(-1)?.reason);
    for (let i = 0; i < 10; i++) await r.book.want(T, true); // the same on again (MQTT repeats it): nothing
    assert.equal(sim.counters.startArrivals, 3);
    await r.clock.advance(590_000);
    assert.equal(sim.counters.startArrivals, 4, 'a new round after retryInterval');
    r.book.close();
  });

  it('after a crash with a START written down but not known to have arrived: progress first, and no START before the wait has passed', async () => {
    const store = new MemoryControlStore();
    const clock = new FakeClock();
    const m = { ...emptyMemory(), wanted: true, round: 'START' as const, attempts: 1, command: { action: 'START' as const, at: clock.now() - 20_000 }, last: { action: 'START' as const, at: clock.now() - 20_000 } };
    await store.save(targetKey(T), toKept(T, m, { now: clock.now(), wall: clock.wall() }));
    const r = rig({}, {}, store, clock);
    await r.book.whenReady();
    await clock.advance(0);
    assert.equal(sim.counters.progressQueries >= 1, true);
    assert.equal(sim.counters.startArrivals, 0, 'it may still be on its way');
    assert.match(r.outputs.at(-1)?.reason ?? '', /^START 1\/2 sent 20 s ago: waiting for the session/);
    await clock.advance(39_000);
    assert.equal(sim.counters.startArrivals, 0);
    await clock.advance(2_000);
    assert.equal(sim.counters.startArrivals, 1, 'the second attempt, once the wait has passed with no session');
    await clock.advance(2_000);
    assert.equal(states(r).at(-1), 'charging');
    r.book.close();
  });

  it('a START written down whose session is there after the crash: charging, nothing sent', async () => {
    await client.sendCommand({ action: 'START', ...T });
    const store = new MemoryControlStore();
    const clock = new FakeClock();
    await store.save(targetKey(T), toKept(T, { ...emptyMemory(), wanted: true, round: 'START', attempts: 1, command: { action: 'START', at: clock.now() } }, { now: clock.now(), wall: clock.wall() }));
    const r = rig({}, {}, store, clock);
    await r.book.whenReady();
    await clock.advance(120_000);
    assert.equal(sim.counters.startArrivals, 1, 'only the one before the crash');
    assert.deepEqual(states(r), ['charging']);
    r.book.close();
  });

  it('an off kept with the guard running: carried out when the guard ends, by the wall clock kept', async () => {
    await client.sendCommand({ action: 'START', ...T });
    const store = new MemoryControlStore();
    const clock = new FakeClock();
    const m = { ...emptyMemory(), wanted: false, offPending: true, last: { action: 'START' as const, at: clock.now() - 100_000 }, shown: 'guard|false' };
    await store.save(targetKey(T), toKept(T, m, { now: clock.now(), wall: clock.wall() }));
    const r = rig({}, {}, store, clock);
    await r.book.whenReady();
    await clock.advance(0);
    assert.deepEqual(r.outputs, [], 'the same state as before the restart: no output');
    await clock.advance(199_000);
    assert.equal(sim.counters.stopArrivals, 0);
    await clock.advance(2_000);
    assert.equal(sim.counters.stopArrivals, 1);
    await clock.advance(4_000);
    assert.deepEqual(states(r), ['stopping', 'idle']);
    r.book.close();
  });

  it('STOP until it ends: ignored STOPs are sent again after each wait, three in a round, then failed with NOT_STOPPED and a new round a check later', async () => {
    await client.sendCommand({ action: 'START', ...T });
    const tx = sim.session(T.token)?.transactionId as string;
    const r = rig({ guardMs: 0 });
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 4 });
    await r.book.want(T, false);
    await r.clock.advance(180_000);
    assert.equal(sim.arrivals('STOP', tx), 3);
    assert.equal(states(r).at(-1), 'failed');
    assert.deepEqual(r.errors.map((e) => e.code), ['NOT_STOPPED']);
    await r.clock.advance(31_000);
    assert.equal(sim.arrivals('STOP', tx), 4, 'a new round');
    await r.clock.advance(62_000);
    assert.equal(sim.arrivals('STOP', tx), 5);
    assert.equal(states(r).at(-1), 'idle');
    r.book.close();
  });

  it('a node whose target changed since: the kept old target is forgotten, not controlled on', async () => {
    const store = new MemoryControlStore();
    const clock = new FakeClock();
    const old = { ...T, token: 'FC-OLD' };
    await store.save(targetKey(old), toKept(old, { ...emptyMemory(), wanted: true }, { now: clock.now(), wall: clock.wall() }));
    const deps: ControlDeps = {
      poll: (t) => client.getProgress(t.token).then((res) => res.record),
      send: (c) => client.sendCommand(c),
      store,
      clock,
      track: clock.track,
      onState: () => undefined,
      onError: () => undefined,
    };
    const book = new ControlBook(SETTINGS, deps, T);
    await book.whenReady();
    await clock.advance(120_000);
    assert.equal(book.size, 0);
    assert.equal(store.kept.size, 0, 'forgotten in the store');
    assert.equal(sim.counters.startArrivals + sim.counters.progressQueries, 0);
    book.close();
  });

  it('who may send is a hook: without the right to send it only watches and reports', async () => {
    const r = rig({}, { mayCommand: () => false });
    await r.book.want(T, true);
    await r.clock.advance(120_000);
    assert.equal(sim.counters.startArrivals, 0);
    assert.equal(r.outputs.at(-1)?.reason, OTHER_SENDER);
    r.book.close();
  });

  it('a store that cannot keep the command: nothing is sent, the failure is said', async () => {
    const failing = new MemoryControlStore();
    let writes = 0;
    failing.save = () => (++writes > 1 ? Promise.reject(new Error('disk full')) : Promise.resolve());
    const r = rig({}, {}, failing);
    const err = await r.book.want(T, true);
    assert.match(String(err?.message), /disk full/);
    assert.equal(sim.counters.startArrivals, 0);
    r.book.close();
  });

  it('a START the service refuses (409: the connector is busy with another token): busy with its reason, not sent again before retryInterval', async () => {
    await client.sendCommand({ action: 'START', ...T, token: 'SOMEONE-ELSE' });
    const r = rig();
    const err = await r.book.want(T, true);
    assert.equal(err?.code, 'HTTP');
    assert.equal(states(r).at(-1), 'busy');
    assert.match(r.outputs.at(-1)?.reason ?? '', /^the connector is busy .*409.*busy/);
    await r.clock.advance(300_000);
    assert.equal(sim.arrivals('START', `${T.token}|${T.locationId}|${T.evseId}`), 1);
    r.book.close();
  });

  it('progress unreadable: one error for the outage, whether the check was a timer or a message; the output says the wish waits', async () => {
    const r = rig({ checkMs: 10_000 });
    const first = await r.book.want(T, true);
    assert.equal(first, undefined);
    sim.inject({ target: 'get', kind: 'status', status: 400, times: Infinity });
    await r.clock.advance(120_000);
    assert.equal(r.errors.length, 1, r.errors.map((e) => e.message).join(' | '));
    assert.equal(r.errors[0].code, 'HTTP');
    const err = await r.book.want(T, false);
    assert.equal(err, undefined, 'the outage was reported already');
    assert.equal(r.outputs.at(-1)?.wanted, false);
    assert.match(r.outputs.at(-1)?.reason ?? '', /^progress cannot be read .*: the wish is carried out once it can be/);
    r.book.close();
  });

  it('closing leaves no timer, and nothing runs after it', async () => {
    const r = rig({ checkMs: 1_000 });
    await r.book.want(T, true);
    assert.ok(r.clock.pendingTimers > 0);
    r.book.close();
    assert.equal(r.clock.pendingTimers, 0);
    const polled = sim.counters.progressQueries;
    await r.clock.advance(60_000);
    assert.equal(sim.counters.progressQueries, polled);
    await until(() => true, 'nothing');
  });

  it('what is kept: the wish and the command before the command is sent', async () => {
    const store = new MemoryControlStore();
    const seen: Array<KeptTarget | undefined> = [];
    const r = rig({}, {
      send: (c) => {
        seen.push(store.kept.get(targetKey(T)));
        return client.sendCommand(c);
      },
    }, store);
    await r.book.want(T, true);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.wanted, true);
    assert.equal(seen[0]?.command?.action, 'START', 'written down before it went');
    r.book.close();
  });
});
