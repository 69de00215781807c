/**
 * Where charging-control's controller meets its depot, on a fake clock
 * against the real simulator, with a depot hook the test answers: the START
 * only after the grant is answered yes; a refusal queues without using an
 * attempt; a wish that comes while the depot is asked is not overtaken by the
 * old wish's START; the depot's STOP says why and leaves the target queued
 * again; the energy limit counts the wish's total across turns.
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import { MemoryControlStore } from '../../../nodes/lib/control/store';
import type { DepotHook, DepotWord, HoldFacts } from '../../../nodes/lib/depot/link';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator } from '../../harness';
import { FakeClock } from './fake-clock';
import { controlSettings } from './settings';

const T = { locationId: 'DS-LOC', evseId: '1', token: 'DS-RFID-1' };
const VIEW = { position: null, waiting: 0, inUse: 1, limit: 1, usedKW: 11, budgetKW: null };

/** A depot the test answers: each call recorded, asks and holds answered by the functions given. */
class TestDepot implements DepotHook {
  readonly calls: string[] = [];
  grant: () => Promise<boolean> = () => Promise.resolve(true);
  onHold: (f: HoldFacts) => DepotWord = () => ({ view: VIEW });
  hold(_key: string, f: HoldFacts): Promise<DepotWord> {
    this.calls.push(`hold:${f.state}`);
    return Promise.resolve(this.onHold(f));
  }
  async ask(): Promise<DepotWord> {
    this.calls.push('ask');
    const yes = await this.grant();
    return yes ? { view: VIEW, granted: true } : { view: { ...VIEW, position: 1, waiting: 1 }, granted: false, reason: 'waiting for a slot: 1 of 1 in use, 1st of 1' };
  }
  release(): Promise<DepotWord> {
    this.calls.push('release');
    return Promise.resolve({ view: VIEW });
  }
  unread(): void {
    this.calls.push('unread');
  }
}

describe('charging-control with a depot (fake clock, real simulator)', function () {
  this.timeout(30_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  let clock: FakeClock;
  beforeEach(async () => {
    clock = new FakeClock();
    // The simulator follows the fake clock: its meter moves with the checks.
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, powerW: 3_600, now: () => clock.wall() });
    client = clientFor(sim, { timeoutMs: 2000 });
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  function rig(depot: TestDepot, guardMs = 0) {
    const outputs: ControlSnapshot[] = [];
    const sent: string[] = [];
    const deps: ControlDeps = {
      poll: (t, priority) => client.getProgress(t.token, { priority }).then((res) => res.record),
      send: (c) => {
        sent.push(`${c.action}@${depot.calls.length}`);
        return client.sendCommand(c);
      },
      store: new MemoryControlStore(),
      clock,
      track: clock.track,
      onState: (s, changed) => changed && outputs.push(s),
      onError: () => undefined,
      depot,
    };
    return { clock, outputs, sent, book: new ControlBook(controlSettings({ guardMs }), deps) };
  }

  it('grant before START: the START goes only after the depot answered yes; a refusal is queued, sends nothing and uses no attempt', async () => {
    const depot = new TestDepot();
    depot.grant = () => Promise.resolve(false);
    const r = rig(depot);
    await r.book.want(T, true);
    assert.deepEqual(r.sent, []);
    assert.equal(r.outputs.at(-1)?.state, 'queued');
    assert.equal(r.outputs.at(-1)?.reason, 'waiting for a slot: 1 of 1 in use, 1st of 1');
    assert.deepEqual(r.outputs.at(-1)?.depot, { ...VIEW, position: 1, waiting: 1 });
    await r.clock.advance(120_000); // four checks, each asks again
    assert.deepEqual(r.sent, []);
    assert.ok(depot.calls.filter((c) => c === 'ask').length >= 4);
    depot.grant = () => Promise.resolve(true);
    await r.clock.advance(30_000);
    const sent: string[] = r.sent;
    assert.equal(sent.length, 1);
    assert.match(sent[0], /^START@/);
    assert.equal(depot.calls[Number(sent[0].split('@')[1]) - 1], 'ask', 'the grant was answered right before the START');
    assert.equal(r.outputs.at(-1)?.reason, 'START 1/2 sent', 'the first attempt of its round: the queue used none');
    r.book.close();
  });

  it('a wish that comes while the depot is asked: the old wish\'s START is not sent', async () => {
    const depot = new TestDepot();
    let answer: (yes: boolean) => void = () => undefined;
    depot.grant = () => new Promise((resolve) => (answer = resolve));
    const r = rig(depot);
    const first = r.book.want(T, true);
    for (let i = 0; i < 100 && !depot.calls.includes('ask'); i++) await new Promise((res) => setTimeout(res, 10));
    const off = r.book.want(T, false);
    answer(true);
    await first;
    await off;
    await r.clock.advance(60_000);
    assert.deepEqual(r.sent, [], 'off came while the grant was asked: nothing is started');
    assert.equal(depot.calls.at(-1), 'release', 'and the slot is given back');
    r.book.close();
  });

  it('the depot\'s STOP (a turn) says why and the target charges again in a new session; the energy limit counts the wish\'s total', async () => {
    const depot = new TestDepot();
    let turns = 0;
    // 1 Wh a second, a check every 30 s: a turn at the first check past 20 Wh; the wish's limit of 80 Wh spans three sessions.
    depot.onHold = (f) => (f.state === 'charging' && (f.energyKWh ?? 0) >= 0.02 && !f.yielding ? (turns++, { view: VIEW, yield: { kind: 'turn', reason: 'turn over after 0:02; 1 waiting' } }) : { view: VIEW });
    const r = rig(depot);
    await r.book.want(T, true, { energyLimit: 0.08 });
    for (let i = 0; i < 100 && r.outputs.at(-1)?.state !== 'done'; i++) await r.clock.advance(10_000);
    const stops = r.outputs.filter((o) => o.state === 'stopping');
    assert.ok(stops.length >= 2, `${stops.length} turns`);
    assert.equal(stops[0].reason, 'turn over after 0:02; 1 waiting', 'the STOP says why');
    assert.equal(r.outputs.at(-1)?.state, 'done');
    assert.match(r.outputs.at(-1)?.reason ?? '', /^energy limit of 0\.08 kWh reached \(0\.(0[89]|1)\d* kWh\)/);
    assert.ok(turns >= 2);
    assert.ok(r.sent.filter((s) => s.startsWith('START')).length >= 3, 'charged over several sessions');
    r.book.close();
  });
});
