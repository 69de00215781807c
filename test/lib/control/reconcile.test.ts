/** The rules of charging-control as pure transitions: no I/O, no clock of their own. */
import assert from 'node:assert/strict';
import { emptyMemory, type ControlMemory } from '../../../nodes/lib/control/memory';
import { applyWish, decide, ENDED_AT_STATION, guardLeft, noteSent, observe } from '../../../nodes/lib/control/reconcile';
import { controlSettings } from './settings';

const S = controlSettings();
const NONE = { kind: 'none' } as const;
const PENDING = { kind: 'pending' } as const;
const active = (transactionId = 'TX-1') => ({ kind: 'active', transactionId }) as const;
const mem = (m: Partial<ControlMemory> = {}): ControlMemory => ({ ...emptyMemory(), ...m });

describe('charging-control rules (pure)', () => {
  it('a START taken over from another replica, dated ahead by the hold, is not read as sent in the past or the future', () => {
    const m = mem({ wanted: true, round: 'START', attempts: 1, command: { action: 'START', at: 40_000 } });
    const held = decide(m, NONE, 10_000, S);
    assert.equal(held?.state, 'starting');
    assert.equal(held?.send, undefined, 'held: not sent again');
    assert.match(held?.reason ?? '', /START 1\/2 taken over from another replica/);
    assert.doesNotMatch(held?.reason ?? '', /-\d/);
    assert.match(decide(m, NONE, 45_000, S)?.reason ?? '', /START 1\/2 sent 5 s ago/);
  });

  it('the same wish again changes nothing; a new one starts a new round', () => {
    const m = mem();
    assert.equal(applyWish(m, true, {}, 0, S), true);
    assert.equal(applyWish(m, true, {}, 0, S), false);
    assert.equal(applyWish(m, false, {}, 0, S), true);
    assert.equal(m.offPending, true);
    assert.equal(applyWish(m, false, {}, 0, S), false);
    assert.equal(applyWish(m, false, { force: true }, 0, S), true, 'off again with force: stop now');
    assert.equal(m.force, true);
    assert.equal(applyWish(m, false, { force: true }, 0, S), false);
  });

  it('after failed, a repeated on changes nothing; msg.restart starts a new round, and so does retryInterval; after the driver ended it, only off then on, or restart', () => {
    const m = mem({ wanted: true, round: 'START', attempts: 2, failed: { action: 'START', reason: 'x', at: 0 } });
    assert.equal(applyWish(m, true, {}, 0, S), false);
    assert.equal(decide(m, NONE, 1_000, S)?.state, 'failed');
    assert.equal(applyWish(m, true, {}, 2_000, S), false, 'the same on again');
    assert.equal(decide(m, NONE, S.retryMs - 1, S)?.send, undefined, 'no START before the retry interval');
    assert.equal(decide(m, NONE, S.retryMs, S)?.send?.action, 'START', 'a new round after the retry interval');
    const r = mem({ wanted: true, round: 'START', attempts: 2, failed: { action: 'START', reason: 'x', at: 0 } });
    assert.equal(applyWish(r, true, { restart: true }, 0, S), true);
    assert.equal(r.attempts, 0);
    assert.equal(applyWish(r, true, { restart: true }, 0, S), false, 'the same restart again');
    const ended = mem({ wanted: true, endedAtStation: true });
    assert.equal(applyWish(ended, true, {}, 0, S), false);
    assert.equal(decide(ended, NONE, 0, S)?.reason, ENDED_AT_STATION);
    assert.equal(applyWish(ended, true, { restart: true }, 0, S), true);
    assert.equal(decide(ended, NONE, 0, S)?.send?.action, 'START');
    const again = mem({ wanted: true, endedAtStation: true });
    applyWish(again, false, {}, 0, S);
    applyWish(again, true, {}, 0, S);
    assert.equal(decide(again, NONE, 0, S)?.send?.action, 'START');
  });

  it('msg.restart while the bound on STARTs is full: taken (so it is answered), no START, and the decision says when the next one goes', () => {
    const m = mem({ wanted: true, round: 'START', attempts: 2, failed: { action: 'START', reason: 'x', at: 100_000 }, starts: [40_000, 100_000] });
    const failed = decide(m, NONE, 120_000, S);
    assert.equal(failed?.startInMs, S.retryMs - 20_000, 'the retry');
    assert.equal(applyWish(m, true, { restart: true }, 120_000, S), true);
    const held = decide(m, NONE, 120_000, S);
    assert.equal(held?.state, 'failed');
    assert.equal(held?.send, undefined);
    assert.equal(held?.startInMs, 600_000 - 80_000, 'the bound frees with the oldest START of the window');
    assert.match(held?.reason ?? '', /^no more than 2 STARTs per 600 s: next START in 8:40$/);
    assert.equal(applyWish(m, true, { restart: true }, 130_000, S), true, 'pressed again: answered again');
    assert.equal(decide(m, NONE, 640_000, S)?.send?.action, 'START', 'once the bound frees');
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

  it('never a second START while one may be on its way or a session is pending; pending past the wait is a failed attempt, polled at the check interval', () => {
    const m = mem({ wanted: true });
    noteSent(m, 'START', 0);
    for (const [view, at] of [[NONE, 1_000], [PENDING, 30_000], [NONE, 59_999]] as const) {
      observe(m, view, at, S);
      assert.equal(decide(m, view, at, S)?.send, undefined, `${view.kind} at ${at}`);
    }
    observe(m, NONE, 60_000, S);
    assert.equal(decide(m, NONE, 60_000, S)?.send?.action, 'START', 'after the wait, with no session');
    const p = mem({ wanted: true });
    noteSent(p, 'START', 0);
    observe(p, PENDING, 60_000, S);
    const d = decide(p, PENDING, 60_000, S);
    assert.equal(d?.state, 'failed');
    assert.match(String(d?.reason), /pending/);
    assert.equal(d?.nextMs, S.checkMs);
    observe(p, NONE, 61_000, S);
    assert.equal(decide(p, NONE, 61_000, S)?.send, undefined, 'no START before the retry interval');
  });

  it('at most startAttempts STARTs per retryInterval, however the wish flips', () => {
    const m = mem();
    let sent = 0;
    for (let t = 0; t < S.retryMs; t += S.waitMs) {
      applyWish(m, true, {}, t, S);
      observe(m, NONE, t, S);
      const d = decide(m, NONE, t, S);
      if (d?.send) {
        noteSent(m, 'START', t);
        sent++;
      }
      applyWish(m, false, {}, t, S);
      observe(m, NONE, t + 1, S);
    }
    assert.equal(sent, S.startAttempts);
  });

  it('onDelay: an on acts only once it has held for the delay; a flip back within it sends nothing', () => {
    const D = { ...S, onDelayMs: 10_000 };
    const m = mem({ wanted: false, lastWish: null });
    applyWish(m, true, {}, 0, D);
    assert.equal(decide(m, NONE, 5_000, D)?.send, undefined);
    applyWish(m, false, {}, 6_000, D);
    applyWish(m, true, {}, 7_000, D);
    assert.equal(decide(m, NONE, 16_000, D)?.send, undefined, 'held since the second on, at 7 s');
    assert.equal(decide(m, NONE, 17_000, D)?.send?.action, 'START');
    assert.equal(m.limitKWh, null);
    const limited = mem();
    applyWish(limited, true, {}, 0, { ...D, energyLimitKWh: 20 });
    decide(limited, NONE, 10_000, { ...D, energyLimitKWh: 20 });
    assert.equal(limited.limitKWh, 20, "a held on takes the node's limit when it acts");
  });

  it('energy limit: the session is stopped when it reaches it (no guard), then done until a new wish', () => {
    const m = mem();
    applyWish(m, true, { energyLimit: 5 }, 0, S);
    noteSent(m, 'START', 0);
    observe(m, { kind: 'active', transactionId: 'TX-1', energyKWh: 4.9 }, 1_000, S);
    assert.equal(decide(m, { kind: 'active', transactionId: 'TX-1', energyKWh: 4.9 }, 1_000, S)?.state, 'charging');
    const d = decide(m, { kind: 'active', transactionId: 'TX-1', energyKWh: 5 }, 2_000, S);
    assert.deepEqual(d?.send, { action: 'STOP', transactionId: 'TX-1' });
    noteSent(m, 'STOP', 2_000, 'TX-1');
    observe(m, NONE, 3_000, S);
    assert.equal(decide(m, NONE, 3_000, S)?.state, 'done');
    assert.equal(decide(m, NONE, S.retryMs * 2, S)?.send, undefined);
    assert.equal(applyWish(m, true, { energyLimit: 5 }, 4_000, S), false, 'the same wish again');
    assert.equal(applyWish(m, true, { energyLimit: 8 }, 4_000, S), true, 'a new limit');
    assert.equal(decide(m, NONE, S.retryMs * 2, S)?.send?.action, 'START');
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
    applyWish(m, false, {}, 0, S);
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
