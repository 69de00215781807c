import assert from 'node:assert/strict';
import type { ProgressRecord } from '../../../nodes/lib/session/record';
import { savedState, step, TrackerState, trackerState } from '../../../nodes/lib/session/tracker';

function record(meterEnd: number, at: string, tx = 'TX-1'): ProgressRecord {
  return { eventType: 'Updated', timestamp: at, createdAt: '2026-11-22T10:00:00Z', evseId: 1, tokenId: 'T', locationId: 'L', transactionData: { transactionId: tx, cdrId: 'c-1', meterStart: 1000, meterEnd } };
}

/** A deep copy of a state (its parse memo aside), to compare with after a step. */
const frozen = (s: TrackerState) => structuredClone({ ...s, created: null });

describe('tracker: step(state, record, wallNow) -> { state, events }, pure', () => {
  const wallNow = Date.UTC(2026, 10, 22, 11, 0, 0);

  it('never changes the state it is given: stepping the same state twice gives the same events, so a state not committed is simply not taken', () => {
    let state = trackerState('T');
    state = step(state, record(1000, '2026-11-22T10:00:02'), wallNow, {}).state;
    state = step(state, record(1500, '2026-11-22T10:00:12'), wallNow, {}).state;
    const before = frozen(state);
    const first = step(state, record(1700, '2026-11-22T10:00:22'), wallNow, {});
    assert.deepEqual(frozen(state), before, 'the state given is as it was');
    const again = step(state, record(1700, '2026-11-22T10:00:22'), wallNow, {});
    assert.deepEqual(again.events.map((e) => e.event), ['updated']);
    assert.deepEqual(again.events, first.events);
    assert.equal(first.state.meterEnd, 1700);
    assert.equal(first.state.last?.powerKW, again.state.last?.powerKW);
    assert.ok(first.state.last?.powerKW, 'a power estimate from the readings kept');
  });

  it('an end: ended carries the last values and endedAt from the time passed in, and the next state sees nothing', () => {
    const seen = step(trackerState('T'), record(1500, '2026-11-22T10:00:12'), wallNow, {}).state;
    const { state, events } = step(seen, null, wallNow, {});
    assert.deepEqual(events.map((e) => e.event), ['ended']);
    assert.equal((events[0].session as { endedAt?: string } | null)?.endedAt, new Date(wallNow).toISOString());
    assert.equal(state.seen, false);
    assert.equal(savedState(state), null);
    assert.equal(seen.seen, true, 'the state before the end is untouched');
  });

  it('keeps a copy of its own: a flow editing the event\'s session changes neither the state nor the next event', () => {
    const { state, events } = step(trackerState('T'), record(1500, '2026-11-22T10:00:12'), wallNow, {});
    (events[0].session as { meterEnd: number | null }).meterEnd = 99;
    assert.equal(state.last?.meterEnd, 1500);
    assert.deepEqual(step(state, record(1500, '2026-11-22T10:00:12'), wallNow, {}).events, []);
  });
});
