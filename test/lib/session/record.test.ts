import assert from 'node:assert/strict';
import { deriveSession, parseZonelessTimestamp, hasTransaction, cdrIdOf, ProgressRecord, recordTimes, CreatedAtCache } from '../../../nodes/lib/session/record';
import { record } from './record-fixture';

describe('session record: values derived from a progress record (no Node-RED)', () => {
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
  it('trusts a zone designator when the service sends one (Z, ±hh:mm, ±hhmm), whatever the configured zone', () => {
    const at = Date.UTC(2026, 5, 1, 8);
    for (const zone of ['UTC', 'local'] as const) {
      assert.equal(parseZonelessTimestamp('2026-06-01T08:00:00Z', zone), at);
      assert.equal(parseZonelessTimestamp('2026-06-01T08:00:00z', zone), at);
      assert.equal(parseZonelessTimestamp('2026-06-01T10:00:00+02:00', zone), at);
      assert.equal(parseZonelessTimestamp('2026-06-01T10:00:00+0200', zone), at);
      assert.equal(parseZonelessTimestamp('2026-06-01T05:30:00-02:30', zone), at);
      assert.equal(parseZonelessTimestamp('2026-06-01T08:00:00.123-00:00', zone), at + 123);
    }
    // No designator: the configured zone decides (the date's own dashes are not an offset).
    assert.equal(parseZonelessTimestamp('2026-06-01T08:00:00', 'UTC'), at);
    assert.equal(parseZonelessTimestamp('2026-06-01T08:00:00.5', 'UTC'), at + 500);
  });
  it('has a transaction only with a non-empty transactionId, read from own properties', () => {
    assert.equal(hasTransaction(record), true);
    assert.equal(hasTransaction(null), false);
    assert.equal(hasTransaction({ ...record, transactionData: { transactionId: '' } }), false);
    assert.equal(hasTransaction(JSON.parse('{"transactionData":{"__proto__":{"transactionId":"X"}}}') as ProgressRecord), false);
    assert.equal(cdrIdOf(record), record.transactionData?.cdrId);
    assert.equal(cdrIdOf({ transactionData: { cdrId: 42 } }), null);
  });

  it('recordTimes parses a watched session\'s createdAt once, and again when it changes', () => {
    const cache: CreatedAtCache = { text: null, ms: NaN };
    const first = recordTimes({ createdAt: '2026-11-22T12:00:00Z', timestamp: '2026-11-22T12:30:00' }, 'UTC', cache);
    assert.equal(first.createdMs, Date.parse('2026-11-22T12:00:00Z'));
    assert.equal(first.timestampMs, Date.parse('2026-11-22T12:30:00Z'));
    assert.deepEqual(cache, { text: '2026-11-22T12:00:00Z', ms: first.createdMs });
    // The same text is taken from the cache (a planted value shows it was not parsed again)...
    cache.ms = 42;
    assert.equal(recordTimes({ createdAt: '2026-11-22T12:00:00Z' }, 'UTC', cache).createdMs, 42);
    // ...a new session's createdAt is parsed, and a record without one has none.
    assert.equal(recordTimes({ createdAt: '2026-11-23T08:00:00Z' }, 'UTC', cache).createdMs, Date.parse('2026-11-23T08:00:00Z'));
    assert.ok(Number.isNaN(recordTimes({}, 'UTC', cache).createdMs));
  });
});
