import assert from 'node:assert/strict';
import { resolveFields, tokensFrom, placeOf } from '../../../nodes/lib/session/inputs';
import { ChargingError } from '../../../nodes/lib/errors';
import { record } from './record-fixture';

function fieldError(fn: () => unknown): ChargingError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ChargingError, 'a ChargingError');
    return e;
  }
  assert.fail('expected an error');
}

describe('session inputs: fields from the node and msg.payload (no Node-RED)', () => {
  it('prefers the node setting and falls back to msg.payload', () => {
    const f = resolveFields(['locationId', 'evseId', 'token'] as const, { locationId: 'NODE-LOC' }, { locationId: 'PAYLOAD-LOC', evseId: '2', token: 'T' });
    assert.deepEqual(f, { locationId: 'NODE-LOC', evseId: '2', token: 'T' });
  });

  it('reads a progress record as a stop input: tokenId, numeric evseId, transactionData.transactionId', () => {
    const f = resolveFields(['locationId', 'evseId', 'token', 'transactionId'] as const, {}, record);
    assert.deepEqual(f, { locationId: 'LOC-1', evseId: '3', token: 'RFID-1', transactionId: 'TX-1' });
  });

  it('names the missing field', () => {
    const e = fieldError(() => resolveFields(['locationId', 'evseId', 'token'] as const, {}, { locationId: 'L', token: 'T' }));
    assert.equal(e.code, 'MISSING_FIELD');
    assert.equal(e.field, 'evseId');
    assert.match(e.message, /evseId is required/);
  });

  it('treats empty and whitespace strings as missing', () => {
    const e = fieldError(() => resolveFields(['token'] as const, { token: '  ' }, { token: '' }));
    assert.equal(e.code, 'MISSING_FIELD');
    assert.equal(e.field, 'token');
  });

  it('refuses a token that is not a string, naming it and its type', () => {
    for (const bad of [42, true, { a: 1 }, ['x']]) {
      const e = fieldError(() => resolveFields(['token'] as const, {}, { token: bad }));
      assert.equal(e.code, 'INVALID_INPUT');
      assert.equal(e.field, 'token');
    }
  });

  it('ignores inherited keys such as __proto__ and constructor', () => {
    const payload = JSON.parse('{"__proto__": {"token": "EVIL"}, "constructor": {"token": "EVIL"}}') as unknown;
    const e = fieldError(() => resolveFields(['token'] as const, {}, payload));
    assert.equal(e.code, 'MISSING_FIELD');
    assert.equal(({} as Record<string, unknown>).token, undefined, 'no prototype pollution');
  });

  it('accepts payloads of every JSON type without throwing anything but a ChargingError', () => {
    for (const p of [null, 0, 'text', true, [], [1, 2], {}, { token: null }]) {
      const e = fieldError(() => resolveFields(['token'] as const, {}, p));
      assert.ok(['MISSING_FIELD', 'INVALID_INPUT'].includes(e.code));
    }
  });

  it('refuses oversized values and control characters', () => {
    assert.equal(fieldError(() => resolveFields(['token'] as const, {}, { token: 'x'.repeat(300) })).code, 'INVALID_INPUT');
    assert.equal(fieldError(() => resolveFields(['token'] as const, {}, { token: 'a\nb' })).code, 'INVALID_INPUT');
  });
  it('refuses a lone UTF-16 surrogate before anything is sent, naming the field', () => {
    for (const bad of ['\ud800', 'ab\udc00cd', 'x\ud83d']) {
      const e = fieldError(() => resolveFields(['token'] as const, {}, { token: bad }));
      assert.equal(e.code, 'INVALID_INPUT');
      assert.equal(e.field, 'token');
      assert.match(e.message, /unpaired UTF-16 surrogate/);
    }
    // A proper pair (an emoji) is fine.
    assert.equal(resolveFields(['token'] as const, {}, { token: 'RFID-\ud83d\ude00' }).token, 'RFID-\ud83d\ude00');
  });

  it('names the tokens of a watch message: a string, {token}, a record, or an array of these', () => {
    assert.deepEqual(tokensFrom('A'), ['A']);
    assert.deepEqual(tokensFrom({ token: 'B' }), ['B']);
    assert.deepEqual(tokensFrom([{ tokenId: 'C' }, 'D']), ['C', 'D']);
    assert.deepEqual(tokensFrom([]), []);
    assert.throws(() => tokensFrom([{ token: 42 }]), (e: ChargingError) => e.code === 'INVALID_INPUT');
  });

  it('reads the place (locationId, evseId) a payload names, own properties only', () => {
    assert.deepEqual(placeOf({ locationId: 'L', evseId: 3, token: 'T' }), { locationId: 'L', evseId: 3 });
    assert.deepEqual(placeOf(JSON.parse('{"__proto__":{"locationId":"X"}}')), {});
    assert.deepEqual(placeOf(null), {});
  });
});
