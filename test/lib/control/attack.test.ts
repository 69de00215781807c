/**
 * charging-control attacked as a user leaves it running: dashboard buttons
 * pressed twice, a wish cancelled just before a redeploy, a session that shows
 * up after the wait. Fake clock, real simulator over HTTP, commands counted
 * where they land (the simulator's arrivals).
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import type { ControlSettings } from '../../../nodes/lib/control/memory';
import { MemoryControlStore } from '../../../nodes/lib/control/store';
import type { ChargingError } from '../../../nodes/lib/errors';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { startCommand } from '../../../nodes/lib/session/commands';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator } from '../../harness';
import { FakeClock } from './fake-clock';
import { controlSettings } from './settings';

const T = { locationId: 'ATK-LOC', evseId: '1', token: 'ATK-RFID-1' };
const KEY = `${T.token}|${T.locationId}|${T.evseId}`;
const SETTINGS = controlSettings({ guardMs: 0 });

interface Rig {
  book: ControlBook;
  clock: FakeClock;
  store: MemoryControlStore;
  outputs: ControlSnapshot[];
  errors: ChargingError[];
}

describe('charging-control attacked (fake clock, real simulator)', function () {
  this.timeout(30_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  /** progress hides the session until this fake time (a station slow to report it); 0: never hidden */
  let hiddenUntil = 0;
  beforeEach(async () => {
    hiddenUntil = 0;
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0 });
    client = clientFor(sim, { timeoutMs: 2000 });
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  function rig(settings: Partial<ControlSettings> = {}, store = new MemoryControlStore(), clock = new FakeClock()): Rig {
    const r = { clock, store, outputs: [] as ControlSnapshot[], errors: [] as ChargingError[] } as Rig;
    const deps: ControlDeps = {
      poll: async (t, priority) => {
        const record = (await client.getProgress(t.token, { priority })).record;
        return clock.now() < hiddenUntil ? null : record;
      },
      send: (c) => client.sendCommand(c),
      store,
      clock,
      track: clock.track,
      onState: (s, changed) => changed && r.outputs.push(s),
      onError: (_t, err) => r.errors.push(err),
    };
    r.book = new ControlBook({ ...SETTINGS, ...settings }, deps);
    return r;
  }
  const starts = () => sim.arrivals('START', KEY);
  /** STOPs that reached the service, whatever their transaction (arrivals count STOPs per transactionId) */
  const stops = () => sim.counters.stops;
  /** the driver taps the node's RFID card at the station: a session nobody asked the node for */
  const tapAtStation = () => client.sendCommand(startCommand(T));

  it('msg.force pressed twice (two sessions started at the station, enforce off): each press stops the session there', async () => {
    const r = rig();
    await r.book.want(T, false);
    await tapAtStation();
    await r.clock.advance(30_000);
    assert.equal(r.outputs.at(-1)?.state, 'charging', 'enforce off: a session started at the station is left alone');
    await r.book.want(T, false, { force: true });
    await r.clock.advance(30_000);
    assert.equal(stops(), 1, 'the first press stops it');
    assert.equal(r.outputs.at(-1)?.state, 'idle');
    await tapAtStation();
    await r.clock.advance(30_000);
    await r.book.want(T, false, { force: true });
    await r.clock.advance(30_000);
    assert.equal(stops(), 2, 'the second press, for another session, must stop it too (a STOP that did not stop)');
    assert.equal(sim.activeSessions(), 0);
    r.book.close();
  });

  it('msg.restart pressed again after a NEW failure: a new round each time (bounded by startAttempts per window)', async () => {
    sim.inject({ target: 'post', kind: 'ignore-start', times: 100 });
    const r = rig({ retryMs: 0 });
    await r.book.want(T, true);
    await r.clock.advance(200_000);
    assert.equal(starts(), 2);
    assert.equal(r.outputs.at(-1)?.state, 'failed');
    await r.clock.advance(700_000);
    await r.book.want(T, true, { restart: true });
    await r.clock.advance(200_000);
    assert.equal(starts(), 4, 'the first press: a new round');
    assert.equal(r.outputs.at(-1)?.state, 'failed');
    await r.clock.advance(700_000);
    await r.book.want(T, true, { restart: true });
    await r.clock.advance(200_000);
    assert.equal(starts(), 6, 'the second press after a new failure is a deliberate new round, not "the same wish"');
    // A flow that sends restart with every repeat still meets the bound on STARTs.
    for (let i = 0; i < 60; i++) {
      await r.book.want(T, true, { restart: true });
      await r.clock.advance(10_000);
    }
    assert.ok(starts() <= 6 + 2, `at most startAttempts per 600 s window: ${starts()}`);
    r.book.close();
  });

  it('onDelay: an on cancelled by an off, then a redeploy before the next check: no START nobody asked for', async () => {
    const store = new MemoryControlStore();
    const clock = new FakeClock();
    const r = rig({ onDelayMs: 60_000 }, store, clock);
    await r.book.want(T, false);
    await clock.advance(1_000);
    await r.book.want(T, true); // held for onDelay
    await clock.advance(1_000);
    await r.book.want(T, false); // flip back within the delay: cancelled
    r.book.close(); // redeploy right now
    const again = rig({ onDelayMs: 60_000 }, store, clock);
    await again.book.whenReady();
    await clock.advance(600_000);
    assert.equal(starts(), 0, 'the cancelled on must not come back from the store');
    again.book.close();
  });

  it('off while a START of ours may still bring a session: a session that shows up after waitTimeout is stopped (enforce off)', async () => {
    const r = rig();
    await r.book.want(T, true);
    assert.equal(starts(), 1);
    hiddenUntil = r.clock.now() + 90_000; // the station reports the session 90 s late
    await r.clock.advance(10_000);
    await r.book.want(T, false);
    await r.clock.advance(200_000);
    assert.equal(stops(), 1, 'our own START, the user said off: the session it brought must be stopped');
    assert.equal(sim.activeSessions(), 0);
    r.book.close();
  });

  it('off after failed (the STARTs of the round reported no session), then the session appears: stopped (enforce off)', async () => {
    const r = rig();
    await r.book.want(T, true);
    hiddenUntil = r.clock.now() + 400_000;
    await r.clock.advance(200_000);
    // The second START meets the hidden session: 409 (taken for a busy connector, see the report).
    assert.ok(['failed', 'busy'].includes(r.outputs.at(-1)?.state ?? ''), r.outputs.at(-1)?.state);
    await r.book.want(T, false);
    await r.clock.advance(400_000);
    assert.equal(stops(), 1, 'a session brought by our START after the off must be stopped');
    assert.equal(sim.activeSessions(), 0);
    r.book.close();
  });
  /** POSTs of START that reached the simulator, faulted or not */
  const startPosts = () => sim.requests.filter((q) => q.method === 'POST' && q.path.endsWith('/charging-sessions') && q.body.includes('"START"')).length;

  for (const [status, what] of [[401, 'a client without the command scope (GET works, POST 401 even with a fresh token)'], [400, 'a connector the service refuses']] as const) {
    it(`START answered ${status} (${what}): no START at every check; at most startAttempts per retryInterval`, async () => {
      sim.inject({ target: 'post', kind: 'status', status, times: Infinity, body: JSON.stringify({ message: 'no' }) });
      const r = rig();
      await r.book.want(T, true);
      await r.clock.advance(3_600_000);
      // 6 retry windows in the hour, startAttempts 2 each (a 401 is sent twice: once more with a fresh token).
      const bound = (3_600_000 / SETTINGS.retryMs + 1) * SETTINGS.startAttempts * (status === 401 ? 2 : 1);
      assert.ok(startPosts() <= bound, `${startPosts()} STARTs in an hour (at most ${bound})`);
      // One refusal, the same answer every retry: one error to Catch for the episode, as for busy and outages.
      assert.ok(r.errors.length <= 1, `${r.errors.length} errors to Catch in an hour of the same refusal`);
      r.book.close();
    });
  }

  it('msg.force with an offDelay: the dashboard STOP button stops at once, not after the delay meant for a flapping input', async () => {
    const r = rig({ offDelayMs: 300_000 });
    await r.book.want(T, true);
    await r.clock.advance(30_000);
    assert.equal(r.outputs.at(-1)?.state, 'charging');
    await r.book.want(T, false, { force: true });
    await r.clock.advance(5_000);
    assert.equal(stops(), 1, 'msg.force: the STOP now');
    assert.equal(sim.activeSessions(), 0);
    // A plain off still waits its delay.
    await r.book.want(T, true);
    await r.clock.advance(30_000);
    await r.book.want(T, false);
    await r.clock.advance(60_000);
    assert.equal(stops(), 1, 'a plain off waits offDelay');
    await r.clock.advance(300_000);
    assert.equal(stops(), 2);
    r.book.close();
  });
  it('the store fails to save (disk full) while off is wanted and the first STOP was ignored: STOP again until the session ends', async () => {
    class FailingStore extends MemoryControlStore {
      failing = false;
      override save(key: string, kept: Parameters<MemoryControlStore['save']>[1]): Promise<void> {
        return this.failing ? Promise.reject(new Error('ENOSPC: no space left on device')) : super.save(key, kept);
      }
    }
    const store = new FailingStore();
    const r = rig({}, store);
    await r.book.want(T, true);
    await r.clock.advance(30_000);
    assert.equal(r.outputs.at(-1)?.state, 'charging');
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 1 });
    await r.book.want(T, false);
    assert.equal(stops(), 1, 'the first STOP (ignored by the station)');
    store.failing = true;
    await r.clock.advance(600_000);
    assert.ok(stops() >= 2, `a STOP that did not stop: ${stops()} STOPs in 10 minutes with the store failing`);
    assert.equal(sim.activeSessions(), 0, 'the car still charges');
    assert.ok(r.errors.length >= 1 && r.errors.length <= 3, `the store failure said to Catch (once a streak): ${r.errors.length}`);
    r.book.close();
  });

  it('the store fails to save on the very first wish (off, enforce on, a session at the station): it is still stopped', async () => {
    const store = new MemoryControlStore();
    store.save = () => Promise.reject(new Error('ENOSPC: no space left on device'));
    await tapAtStation();
    const r = rig({ enforce: true }, store);
    const err = await r.book.want(T, false);
    assert.ok(err, 'the store failure answered to the wish');
    await r.clock.advance(120_000);
    assert.equal(stops(), 1, 'wanted off with enforce: the STOP goes even when it cannot be written down');
    assert.equal(sim.activeSessions(), 0);
    r.book.close();
  });
});
