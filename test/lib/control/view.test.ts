/** The pure parts of charging-control: the wish, the view of a progress answer, what is kept. */
import assert from 'node:assert/strict';
import { parseWanted } from '../../../nodes/lib/control/wish';
import { viewOf, targetKey } from '../../../nodes/lib/control/view';
import { emptyMemory, fromKept, toKept } from '../../../nodes/lib/control/memory';
import { isChargingError } from '../../../nodes/lib/errors';

const T = { locationId: 'L1', evseId: '1', token: 'RFID-1' };
const record = (extra: Record<string, unknown> = {}) => ({ eventType: 'Updated', tokenId: 'RFID-1', locationId: 'L1', evseId: 1, ...extra });

describe('charging-control: the wish (msg.payload)', () => {
  it('reads true/false, "on"/"off", 1/0 and "START"/"STOP" in any case', () => {
    for (const v of [true, 1, 'on', 'ON', ' On ', 'start', 'START', 'true', '1']) assert.equal(parseWanted(v), true, String(v));
    for (const v of [false, 0, 'off', 'OFF', 'stop', 'Stop', 'false', '0']) assert.equal(parseWanted(v), false, String(v));
  });

  it('refuses anything else as INVALID_INPUT, saying what it got', () => {
    for (const v of ['maybe', '', 2, -1, null, undefined, {}, [], { payload: true }, 'onn', NaN]) {
      try {
        parseWanted(v);
        assert.fail(`accepted ${String(v)}`);
      } catch (err) {
        assert.ok(isChargingError(err) && err.code === 'INVALID_INPUT' && err.field === 'payload', String(err));
      }
    }
    assert.throws(() => parseWanted('x'.repeat(500)), (e: Error) => e.message.length < 200 && /"x{40}…"/.test(e.message));
  });
});

describe('charging-control: viewOf, one progress answer for a target', () => {
  it('no record: no session', () => {
    assert.deepEqual(viewOf(null, T), { kind: 'none' });
    assert.deepEqual(viewOf(undefined, T), { kind: 'none' });
  });

  it('no transactionData (or no transactionId yet): pending', () => {
    assert.deepEqual(viewOf(record(), T), { kind: 'pending' });
    assert.deepEqual(viewOf(record({ transactionData: null }), T), { kind: 'pending' });
    assert.deepEqual(viewOf(record({ transactionData: { meterStart: 1 } }), T), { kind: 'pending' });
    assert.deepEqual(viewOf({}, T), { kind: 'pending' }, 'no field assumed present');
  });

  it('a transactionId: active with that transaction (evseId a number or a string)', () => {
    assert.deepEqual(viewOf(record({ transactionData: { transactionId: 'TX-1' } }), T), { kind: 'active', transactionId: 'TX-1' });
    assert.deepEqual(viewOf(record({ evseId: '1', transactionData: { transactionId: 'TX-2' } }), T), { kind: 'active', transactionId: 'TX-2' });
  });

  it('the token on another connector: elsewhere', () => {
    assert.deepEqual(viewOf(record({ evseId: 2, transactionData: { transactionId: 'TX-1' } }), T), { kind: 'elsewhere', locationId: 'L1', evseId: '2' });
    assert.deepEqual(viewOf(record({ locationId: 'L9' }), T), { kind: 'elsewhere', locationId: 'L9', evseId: '1' });
  });

  it('what cannot be read: unreadable, never guessed', () => {
    for (const r of ['text', 42, [record()], record({ tokenId: 'OTHER' }), record({ transactionData: 'x' }), record({ transactionData: [] }), record({ transactionData: { transactionId: 7 } })]) {
      assert.equal(viewOf(r, T).kind, 'unreadable', JSON.stringify(r));
    }
  });

  it('own properties only: a "__proto__" in the record means nothing', () => {
    const r = JSON.parse('{"tokenId":"RFID-1","__proto__":{"transactionData":{"transactionId":"TX-EVIL"}}}') as unknown;
    assert.deepEqual(viewOf(r, T), { kind: 'pending' });
  });

  it('one key per target', () => {
    assert.notEqual(targetKey(T), targetKey({ ...T, evseId: '2' }));
    assert.notEqual(targetKey({ locationId: 'a|b', evseId: 'c', token: 't' }), targetKey({ locationId: 'a', evseId: 'b|c', token: 't' }));
  });
});

describe('charging-control: what is kept across a restart', () => {
  const clocks = { now: 5_000, wall: Date.parse('2026-11-25T12:00:00Z') };

  it('round trip: times go to the wall clock and back to the monotonic one of the next process', () => {
    const m = { ...emptyMemory(), wanted: false, offPending: true, round: 'STOP' as const, attempts: 2, seenTx: 'TX-1', shown: 'guard|false' };
    m.command = { action: 'STOP', at: 4_000, transactionId: 'TX-1' };
    m.last = { action: 'START', at: 1_000 };
    const kept = JSON.parse(JSON.stringify(toKept(T, m, clocks))) as unknown;
    assert.equal((kept as { last: { atWall: number } }).last.atWall, clocks.wall - 4_000);
    // The next process: its monotonic clock at 100, 10 s later by the wall clock.
    const back = fromKept(kept, { now: 100, wall: clocks.wall + 10_000 });
    assert.deepEqual(back?.target, T);
    assert.deepEqual(back?.memory.command, { action: 'STOP', at: 100 - 11_000, transactionId: 'TX-1' });
    assert.deepEqual(back?.memory.last, { action: 'START', at: 100 - 14_000 });
    assert.equal(back?.memory.offPending, true);
    assert.equal(back?.memory.attempts, 2);
  });

  it('a wall clock that went back since: the kept time counts as now, so a guard or a wait is not cut short', () => {
    const m = { ...emptyMemory(), wanted: true, last: { action: 'STOP' as const, at: 5_000 } };
    const back = fromKept(toKept(T, m, clocks), { now: 100, wall: clocks.wall - 60_000 });
    assert.equal(back?.memory.last?.at, 100);
  });

  it('a damaged entry is forgotten, not trusted; a command without a time is taken as just sent', () => {
    for (const raw of [null, 'x', {}, { v: 2 }, { v: 1, target: T }, { v: 1, target: { ...T, token: '' }, wanted: true }, { v: 1, target: T, wanted: 'yes' }]) {
      assert.equal(fromKept(raw, clocks), null, JSON.stringify(raw));
    }
    const back = fromKept({ v: 1, target: T, wanted: true, command: { action: 'START' }, round: 'NOPE', attempts: 9 }, clocks);
    assert.deepEqual(back?.memory.command, { action: 'START', at: clocks.now });
    assert.equal(back?.memory.round, null);
    assert.equal(back?.memory.attempts, 0);
  });
});
