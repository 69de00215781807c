/** The rules of charging-control as pure transitions: no I/O, no clock of their own. */
import assert from 'node:assert/strict';
import { emptyMemory, type ControlMemory, type ControlSettings } from '../../../nodes/lib/control/memory';
import { applyWish, decide, ENDED_AT_STATION, guardLeft, noteSent, observe } from '../../../nodes/lib/control/reconcile';

const S: ControlSettings = { guardMs: 300_000, checkMs: 30_000, confirmMs: 2_000, waitMs: 60_000, startAttempts: 2, stopAttempts: 3, enforce: false };
const NONE = { kind: 'none' } as const;
const PENDING = { kind: 'pending' } as const;
const active = (transactionId = 'TX-1') => ({ kind: 'active', transactionId }) as const;
const mem = (m: Partial<ControlMemory> = {}): ControlMemory => ({ ...emptyMemory(), ...m });

describe('charging-control rules (pure)', () => {
  it('the same wish again changes nothing; a new one starts a new round', () => {
    const m = mem();
    assert.equal(applyWish(m, true), true);
    assert.equal(applyWish(m, true), false);
    assert.equal(applyWish(m, false), true);
    assert.equal(m.offPending, true);
    assert.equal(applyWish(m, false), false);
    assert.equal(applyWish(m, false, { force: true }), true, 'off again with force: stop now');
    assert.equal(m.force, true);
    assert.equal(applyWish(m, false, { force: true }), false);
  });

  it('after failed, the next on tries again, even a repeated one; after the driver ended it, only off then on, or restart', () => {
    const m = mem({ wanted: true, round: 'START', attempts: 2, failed: { action: 'START', reason: 'x', at: 0 } });
    assert.equal(applyWish(m, true), true);
    assert.equal(m.attempts, 0);
    const ended = mem({ wanted: true, endedAtStation: true });
    assert.equal(applyWish(ended, true), false);
    assert.equal(decide(ended, NONE, 0, S)?.reason, ENDED_AT_STATION);
    assert.equal(applyWish(ended, true, { restart: true }), true);
    assert.equal(decide(ended, NONE, 0, S)?.send?.action, 'START');
    const again = mem({ wanted: true, endedAtStation: true });
    applyWish(again, false);
    applyWish(again, true);
    assert.equal(decide(again, NONE, 0, S)?.send?.action, 'START');
  });

  it('an end without a STOP of ours while on is wanted latches "ended at the station"; an end after our STOP does not', () => {
    const m = mem({ wanted: true });
    observe(m, active(), 0, S);
    observe(m, NONE, 1, S);
    assert.equal(m.endedAtStation, true);
    const ours = mem({ wanted: true, seenTx: 'TX-1', command: { action: 'STOP', at: 0, transactionId: 'TX-1' } });
    observe(ours, NONE, 1, S);
    assert.equal(ours.endedAtStation, false);
  });

  it('never a second START while one may be on its way or a session is pending', () => {
    const m = mem({ wanted: true });
    noteSent(m, 'START', 0);
    for (const [view, at] of [[NONE, 1_000], [PENDING, 30_000], [PENDING, 120_000], [NONE, 59_999]] as const) {
      observe(m, view, at, S);
      assert.equal(decide(m, view, at, S)?.send, undefined, `${view.kind} at ${at}`);
    }
    observe(m, NONE, 60_000, S);
    assert.equal(decide(m, NONE, 60_000, S)?.send?.action, 'START', 'after the wait, with no session');
  });

  it('the guard holds back a change of direction only, and force lifts it for a STOP', () => {
    const m = mem({ wanted: false, offPending: true, last: { action: 'START', at: 0 } });
    assert.equal(guardLeft(m, 'STOP', 100_000, S), 200_000);
    assert.equal(guardLeft(m, 'START', 100_000, S), 0);
    assert.equal(decide(m, active(), 100_000, S)?.state, 'guard');
    m.force = true;
    assert.equal(decide(m, active(), 100_000, S)?.send?.action, 'STOP');
    assert.equal(guardLeft(m, 'STOP', 100_000, { ...S, guardMs: 0 }), 0);
  });

  it('an off while our START may still bring a session: the session is stopped when it appears', () => {
    const m = mem({ wanted: true });
    noteSent(m, 'START', 0);
    applyWish(m, false);
    observe(m, NONE, 1_000, S);
    assert.equal(decide(m, NONE, 1_000, S)?.state, 'stopping');
    observe(m, active(), 5_000, S);
    assert.equal(decide(m, active(), 5_000, { ...S, guardMs: 0 })?.send?.action, 'STOP');
  });

  it('a session started at the station while off is wanted: reported; with enforce, stopped', () => {
    const m = mem({ wanted: false });
    observe(m, active(), 0, S);
    assert.equal(decide(m, active(), 0, S)?.state, 'charging');
    assert.equal(decide(m, active(), 0, S)?.send, undefined);
    assert.equal(decide(m, active(), 0, { ...S, enforce: true })?.send?.action, 'STOP');
  });

  it('an unreadable answer decides nothing', () => {
    const m = mem({ wanted: true });
    assert.equal(decide(m, { kind: 'unreadable', why: 'x' }, 0, S), null);
  });
});
