/** The ledger's pure rules: zone and month arithmetic, tariff split, rounding, CSV bytes, CDR rules. */
import assert from 'node:assert/strict';
import { corrected, meterValues, parseCdr } from '../../../nodes/lib/ledger/cdr';
import { toCsv } from '../../../nodes/lib/ledger/csv';
import { roundMoney, sumMoney } from '../../../nodes/lib/ledger/money';
import { closeRecord, openRecord, type LedgerRecord, type SessionFacts } from '../../../nodes/lib/ledger/record';
import { ledgerSettings } from '../../../nodes/lib/ledger/settings';
import { statement } from '../../../nodes/lib/ledger/statement';
import { instantOf, localIso, monthOf, monthRange } from '../../../nodes/lib/ledger/zone';
import { ChargingError } from '../../../nodes/lib/errors';

const Z = 'Europe/Berlin';
const iso = (ms: number) => new Date(ms).toISOString();

describe('ledger rules: zones and months', () => {
  it('a month is half-open in the zone: 00:00 local on the 1st opens it, the last minute before closes the one before', () => {
    const feb = monthRange('2026-02', Z);
    assert.equal(iso(feb.fromMs), '2026-01-31T23:00:00.000Z');
    assert.equal(iso(feb.toMs), '2026-02-28T23:00:00.000Z');
    assert.equal(monthOf(Date.parse('2026-01-31T23:01:00Z'), Z), '2026-02', '00:01 local on the 1st');
    assert.equal(monthOf(Date.parse('2026-01-31T22:59:59Z'), Z), '2026-01');
    assert.equal(monthOf(Date.parse('2026-01-31T23:01:00Z'), 'UTC'), '2026-01', 'the same instant in UTC (what a UTC filter gets wrong)');
    const oct = monthRange('2026-10', Z);
    assert.equal(iso(oct.toMs), '2026-10-31T23:00:00.000Z', 'the month with the autumn change ends at CET midnight');
  });

  it('local times carry their offset; the spring gap moves on, the autumn hour is its first occurrence', () => {
    assert.equal(localIso(Date.parse('2026-10-25T00:30:00Z'), Z).text, '2026-10-25T02:30:00+02:00');
    assert.equal(localIso(Date.parse('2026-10-25T01:30:00Z'), Z).text, '2026-10-25T02:30:00+01:00');
    assert.equal(iso(instantOf(2026, 3, 29, 2, 30, Z)), '2026-03-29T01:30:00.000Z', '02:30 does not exist: 03:30 CEST');
    assert.equal(iso(instantOf(2026, 10, 25, 2, 30, Z)), '2026-10-25T00:30:00.000Z', 'the first 02:30');
    assert.equal(localIso(Date.parse('2026-01-01T12:00:00Z'), 'Asia/Kolkata').offset, '+05:30');
    assert.equal(localIso(Date.parse('2026-01-01T12:00:00Z'), 'America/St_Johns').offset, '-03:30');
  });

  it('an unknown zone is a CONFIG error at deploy', () => {
    assert.throws(() => ledgerSettings({ timeZone: 'Europe/Nowhere' }), (e: ChargingError) => e.code === 'CONFIG');
    assert.throws(() => ledgerSettings({ timeZone: 'UTC', tariffs: '[{"id":"a","currency":"EUR","pricePerKWh":-1}]' }), (e: ChargingError) => e.code === 'CONFIG');
  });
});

describe('ledger rules: money', () => {
  it('rounds half away from zero, once; sums rounded amounts without drift', () => {
    assert.deepEqual([0.125, -0.125, 1.005, 2.675, 0.135, 1.2345].map((v) => roundMoney(v, 2)), [0.13, -0.13, 1.01, 2.68, 0.14, 1.23]);
    assert.equal(roundMoney(12.5, 0), 13);
    assert.equal(sumMoney([0.1, 0.2, 0.3], 2), 0.6);
  });
});

const settings = ledgerSettings({
  timeZone: Z,
  tariffs: JSON.stringify([{ id: 'tou', currency: 'EUR', pricePerKWh: 0.4, windows: [{ days: 'mon-fri', from: '22:00', to: '06:00', pricePerKWh: 0.2 }] }]),
  tokens: JSON.stringify([{ token: 'T-1', label: '=HYPERLINK("x")', vehicle: 'Golf, "blue"', tariff: 'tou' }]),
});

function facts(start: string, end: string, startWh: number, endWh: number): SessionFacts {
  return { transactionId: 'TX-1', cdrId: 'CDR-1', token: 'T-1', locationId: 'L', evseId: '1', meterStart: startWh, meterEnd: endWh, startedAt: start, updatedAt: end.replace(/Z$/, ''), endObserved: true };
}

function record(start: string, end: string, startWh: number, endWh: number): LedgerRecord {
  const open = openRecord({ ...facts(start, start, startWh, startWh) }, settings);
  return closeRecord(open, facts(start, end, startWh, endWh), settings);
}

describe('ledger rules: time of use', () => {
  it('a pair of readings over 22:00 is split in proportion to time; the window runs past midnight on its start day only', () => {
    // Friday 2026-01-16 21:00 to 23:00 local: an hour each side of 22:00.
    const r = record('2026-01-16T20:00:00Z', '2026-01-16T22:00:00Z', 0, 10_000);
    assert.deepEqual(r.segments.map((s) => [s.window, s.energyWh]), [['base', 5000], ['22:00-06:00', 5000]]);
    assert.equal(r.cost, 3);
    // Saturday 2026-01-17 21:00 to 23:00: no window starts on Saturday (mon-fri), but Friday's runs until 06:00 Saturday.
    const sat = record('2026-01-17T04:00:00Z', '2026-01-17T06:00:00Z', 0, 3_000);
    assert.deepEqual(sat.segments.map((s) => [s.window, s.energyWh]), [['22:00-06:00', 1500], ['base', 1500]]);
    assert.equal(sat.cost, 0.9);
  });
});

describe('ledger rules: CSV, byte for byte', () => {
  const r = record('2026-02-01T07:00:00Z', '2026-02-01T08:30:00Z', 1_000, 12_345);
  it('en: comma, decimal point, RFC 4180 quoting, CRLF, the formula guard', () => {
    const csv = toCsv([r], 'en', 2);
    const expected =
      'recordId,revision,token,label,vehicle,locationId,evseId,transactionId,cdrId,startLocal,endLocal,startUtc,endUtc,durationSec,meterStartWh,meterEndWh,energyKWh,cost,currency,tariff,source,endObserved\r\n' +
      `TX-1,1,T-1,"'=HYPERLINK(""x"")","Golf, ""blue""",L,1,TX-1,CDR-1,2026-02-01T08:00:00+01:00,2026-02-01T09:30:00+01:00,2026-02-01T07:00:00.000Z,2026-02-01T08:30:00.000Z,5400,1000,12345,11.345,4.54,EUR,tou,meter,true\r\n`;
    assert.equal(csv, expected);
  });
  it('de: BOM, semicolon, decimal comma; a cell with a semicolon is quoted, one with a comma is not', () => {
    const csv = toCsv([{ ...r, label: '-1+1', vehicle: 'Golf; blue' }], 'de', 2);
    const expected =
      '\uFEFFrecordId;revision;token;label;vehicle;locationId;evseId;transactionId;cdrId;startLocal;endLocal;startUtc;endUtc;durationSec;meterStartWh;meterEndWh;energyKWh;cost;currency;tariff;source;endObserved\r\n' +
      "TX-1;1;T-1;'-1+1;\"Golf; blue\";L;1;TX-1;CDR-1;2026-02-01T08:00:00+01:00;2026-02-01T09:30:00+01:00;2026-02-01T07:00:00.000Z;2026-02-01T08:30:00.000Z;5400;1000;12345;11,345;4,54;EUR;tou;meter;true\r\n";
    assert.equal(csv, expected);
    assert.deepEqual([...Buffer.from(csv, 'utf8').subarray(0, 3)], [0xef, 0xbb, 0xbf]);
  });
});

describe('ledger rules: CDR corrections and the statement', () => {
  const r = record('2026-02-01T07:00:00Z', '2026-02-01T08:30:00Z', 1_000, 12_345);
  it('a CDR makes a revision with its figures, the same CDR nothing, a credit the meter values again', () => {
    const c = corrected(r, meterValues(r), parseCdr({ cdrId: 'CDR-1', energyKWh: 11, totalCost: 4.4 }), 2)!;
    assert.deepEqual([c.revision, c.energyWh, c.cost, c.source], [2, 11000, 4.4, 'cdr']);
    assert.equal(c.segments.reduce((a, s) => a + s.energyWh, 0), 11000);
    assert.equal(corrected(c, meterValues(r), parseCdr({ cdrId: 'CDR-1', energyKWh: 11, totalCost: 4.4 }), 2), null);
    const back = corrected(c, meterValues(r), parseCdr({ cdrId: 'X', credit: true, credit_reference_id: 'CDR-1' }), 2)!;
    assert.deepEqual([back.revision, back.energyWh, back.cost, back.source], [3, r.energyWh, r.cost, 'meter']);
    assert.equal(corrected(back, meterValues(r), parseCdr({ cdrId: 'X', credit: true }), 2), null, 'a credit of meter values changes nothing');
    assert.throws(() => parseCdr({ energyKWh: 1 }), (e: ChargingError) => e.code === 'MISSING_FIELD');
    assert.throws(() => parseCdr({ cdrId: 'a', energyKWh: -1 }), (e: ChargingError) => e.code === 'INVALID_INPUT');
  });

  it('a statement total is the sum of its rounded sessions (what the CSV column adds up to)', () => {
    const recs = [0.004, 0.004, 0.004].map((c, i) => ({ ...r, recordId: `R${i}`, cost: roundMoney(c + 0.001, 2) }));
    const s = statement({ month: '2026-02', timeZone: Z, records: recs, open: 0, over: true, meta: { exportedAt: null, changes: [] }, costDecimals: 2, mask: true });
    assert.equal(s.total, 0.03);
    assert.equal(s.tokens[0].token, '****T-1');
    assert.equal(s.complete, true);
  });
});
