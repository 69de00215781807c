import assert from 'node:assert/strict';
import { deriveSession, resolveFields, startCommand, stopCommand, parseZonelessTimestamp, ProgressRecord } from '../../nodes/lib/session';
import { ChargingError, serviceText } from '../../nodes/lib/errors';

const record: ProgressRecord = {
  eventType: 'Updated',
  timestamp: '2026-11-22T12:30:00',
  createdAt: '2026-11-22T12:00:00Z',
  evseId: 3,
  connectorId: null,
  tokenId: 'RFID-1',
  locationId: 'LOC-1',
  locationUid: '2a7c3bbd-3f1e-4a5a-9c55-0d1ea1c0ffee',
  transactionData: { transactionId: 'TX-1', cdrId: '9b1f5d2e-7c44-4b9a-8f2f-2d5b8f8e1a00', meterStart: 12000, meterEnd: 24345 },
};

function fieldError(fn: () => unknown): ChargingError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ChargingError, 'a ChargingError');
    return e;
  }
  assert.fail('expected an error');
}

describe('session helpers (no Node-RED)', () => {
  describe('resolveFields', () => {
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
  });

  describe('commands', () => {
    it('START has exactly action, locationId, evseId (a string), token', () => {
      const cmd = startCommand({ locationId: 'L', evseId: '7', token: 'T' });
      assert.equal(JSON.stringify(cmd), '{"action":"START","locationId":"L","evseId":"7","token":"T"}');
    });
    it('STOP adds transactionId', () => {
      const cmd = stopCommand({ locationId: 'L', evseId: '7', token: 'T', transactionId: 'X' });
      assert.equal(JSON.stringify(cmd), '{"action":"STOP","locationId":"L","evseId":"7","token":"T","transactionId":"X"}');
    });
  });

  describe('deriveSession', () => {
    it('computes kWh from Wh meter values and the duration from the zone-less timestamp as UTC', () => {
      const s = deriveSession(record);
      assert.equal(s.energyKWh, 12.345);
      assert.equal(s.durationSec, 1800);
      assert.equal(s.transactionId, 'TX-1');
      assert.equal(s.cdrId, record.transactionData?.cdrId);
      assert.equal(s.pending, false);
      assert.equal(s.evseId, '3');
      assert.deepEqual(s.warnings, []);
    });

    it('honours a kWh meter unit', () => {
      const s = deriveSession({ ...record, transactionData: { ...record.transactionData, meterStart: 100, meterEnd: 112 } }, { meterUnit: 'kWh' });
      assert.equal(s.energyKWh, 12);
    });

    it('gives no energy and a warning when meterEnd is below meterStart', () => {
      const s = deriveSession({ ...record, transactionData: { ...record.transactionData, meterStart: 500, meterEnd: 100 } });
      assert.equal(s.energyKWh, null);
      assert.match(s.warnings[0], /below meterStart/);
    });

    it('gives no energy and a warning for a lifetime-sized value (likely a unit mistake)', () => {
      const s = deriveSession({ ...record, transactionData: { ...record.transactionData, meterStart: 0, meterEnd: 5_000_000 } }, { meterUnit: 'kWh' });
      assert.equal(s.energyKWh, null);
      assert.match(s.warnings[0], /check the meter unit/);
    });

    it('gives no duration when the timestamp is before createdAt', () => {
      const s = deriveSession({ ...record, timestamp: '2026-11-22T11:00:00' });
      assert.equal(s.durationSec, null);
      assert.match(s.warnings[0], /before createdAt/);
    });

    it('marks a record without transactionData as pending', () => {
      const { transactionData: _omit, ...pending } = record;
      const s = deriveSession(pending);
      assert.equal(s.pending, true);
      assert.equal(s.transactionId, null);
      assert.equal(s.energyKWh, null);
    });

    it('reads the zone-less timestamp as local time when configured', () => {
      const utc = parseZonelessTimestamp('2026-06-01T10:00:00', 'UTC');
      const local = parseZonelessTimestamp('2026-06-01T10:00:00', 'local');
      assert.equal(utc, Date.UTC(2026, 5, 1, 10));
      assert.equal(local, new Date(2026, 5, 1, 10).getTime());
    });
  });

  describe('serviceText', () => {
    it('pulls the usual message fields out of a JSON error body', () => {
      assert.equal(serviceText('{"error":"invalid_client","error_description":"bad secret"}'), 'invalid_client: bad secret');
      assert.equal(serviceText({ message: 'busy' }), 'busy');
    });
    it('cuts long text', () => {
      const t = serviceText('x'.repeat(1000)) ?? '';
      assert.ok(t.length <= 301);
    });
    it('gives nothing for an empty body', () => {
      assert.equal(serviceText(''), undefined);
    });
  });
});
