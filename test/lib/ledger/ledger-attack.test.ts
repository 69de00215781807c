/**
 * The ledger's pure rules under hostile and awkward input: OCPI's credit CDRs,
 * spreadsheet formulas in every shape, huge numbers, mixed currencies, and
 * time zones whose changes are not a whole hour (what held is kept here too).
 */
import assert from 'node:assert/strict';
import { corrected, meterValues, parseCdr } from '../../../nodes/lib/ledger/cdr';
import { csvCell, toCsv } from '../../../nodes/lib/ledger/csv';
import { advance, closeRecord, openRecord, type LedgerRecord, type SessionFacts } from '../../../nodes/lib/ledger/record';
import { roundMoney, sumMoney } from '../../../nodes/lib/ledger/money';
import { statement } from '../../../nodes/lib/ledger/statement';
import { ledgerSettings, type LedgerSettings } from '../../../nodes/lib/ledger/settings';
import { ChargingError } from '../../../nodes/lib/errors';

const TOU = [{ id: 'tou', currency: 'EUR', pricePerKWh: 0.4, windows: [{ days: 'mon-sun', from: '22:00', to: '06:00', pricePerKWh: 0.2 }] }];
const settingsIn = (timeZone: string, tariffs: unknown[] = TOU): LedgerSettings => ledgerSettings({ timeZone, tariffs: JSON.stringify(tariffs), defaultTariff: 'tou' });

/** A session from its readings [UTC instant, Wh], the first being its start. */
function booked(settings: LedgerSettings, readings: Array<[string, number]>, more: Partial<SessionFacts> = {}): LedgerRecord {
  const at = (i: number): SessionFacts => ({
    transactionId: 'TX-1',
    cdrId: 'CDR-1',
    token: 'T-1',
    locationId: 'L',
    evseId: '1',
    meterStart: readings[0][1],
    meterEnd: readings[i][1],
    startedAt: readings[0][0],
    updatedAt: readings[i][0].replace(/Z$/, ''),
    endObserved: true,
    ...more,
  });
  let open = openRecord(at(0), settings);
  for (let i = 1; i < readings.length - 1; i++) open = advance(open, at(i), settings);
  return closeRecord(open, at(readings.length - 1), settings);
}

const isCode = (code: string) => (e: unknown) => e instanceof ChargingError && e.code === code;

describe('ledger attack: CDR corrections as OCPI sends them', () => {
  const r = booked(settingsIn('Europe/Berlin'), [['2026-02-02T07:00:00Z', 1_000], ['2026-02-02T08:30:00Z', 12_345]]);

  it('a credit CDR carrying the credited amounts as negatives (OCPI) reverts the record to the meter values', () => {
    const c = corrected(r, meterValues(r), parseCdr({ cdrId: 'CDR-1', energyKWh: 11, totalCost: 4.4 }), 2)!;
    const credit = parseCdr({ cdrId: 'CDR-1-C', credit: true, credit_reference_id: 'CDR-1', energyKWh: -11, totalCost: -4.4, currency: 'EUR' });
    const back = corrected(c, meterValues(r), credit, 2)!;
    assert.deepEqual([back.revision, back.energyWh, back.cost, back.source], [3, r.energyWh, r.cost, 'meter']);
    assert.throws(() => parseCdr({ cdrId: 'X', totalCost: -1 }), isCode('INVALID_INPUT'), 'a CDR that is no credit has no negative amounts');
    assert.throws(() => parseCdr({ cdrId: 'X', credit: true, totalCost: Number.NaN }), isCode('INVALID_INPUT'));
  });
});

describe('ledger attack: a CDR\'s cost and its currency', () => {
  const r = booked(settingsIn('Europe/Berlin'), [['2026-02-02T07:00:00Z', 1_000], ['2026-02-02T08:30:00Z', 12_345]]);

  it('a CDR in another currency without its totalCost is refused: the tariff\'s EUR prices are no USD', () => {
    assert.throws(() => corrected(r, meterValues(r), parseCdr({ cdrId: 'CDR-1', energyKWh: 10, currency: 'USD' }), 2), isCode('INVALID_INPUT'));
    const usd = corrected(r, meterValues(r), parseCdr({ cdrId: 'CDR-1', energyKWh: 10, totalCost: 4.1, currency: 'USD' }), 2)!;
    assert.deepEqual([usd.cost, usd.currency], [4.1, 'USD']);
  });

  it('a totalCost for a session priced with no tariff needs its currency: a cost is never without one', () => {
    const unpriced = booked(ledgerSettings({ timeZone: 'UTC' }), [['2026-02-02T07:00:00Z', 0], ['2026-02-02T08:00:00Z', 5_000]]);
    assert.equal(unpriced.cost, null);
    assert.throws(() => corrected(unpriced, meterValues(unpriced), parseCdr({ cdrId: 'C', totalCost: 2 }), 2), isCode('MISSING_FIELD'));
    const eur = corrected(unpriced, meterValues(unpriced), parseCdr({ cdrId: 'C', totalCost: 2, currency: 'eur' }), 2)!;
    assert.deepEqual([eur.cost, eur.currency, eur.source], [2, 'EUR', 'cdr']);
  });
});

describe('ledger attack: the CSV in a spreadsheet', () => {
  it('a text cell is guarded by what a spreadsheet reads first: leading blanks, a line break, full-width signs', () => {
    const guarded = ['=HYPERLINK("http://x","y")', '\t=1+1', ' =1+1', '  +1', '\n=cmd|\'/c calc\'!A0', '\r\n@SUM(A1)', '\u00a0-1+1', '\uff1d1+1', '\uff0b1', '\uff0d1', '\uff20A1'];
    for (const v of guarded) {
      const cell = csvCell(v, ',');
      assert.ok(cell.startsWith("'") || cell.startsWith(`"'`), `${JSON.stringify(v)} → ${JSON.stringify(cell)}`);
    }
    for (const v of ['Anna', 'B-XY 123', '1+1', 'a=b', '', 'Zoë 😀']) assert.equal(csvCell(v, ','), v, `${JSON.stringify(v)} stays as it is`);
    assert.equal(csvCell('say "hi"\r\nbye', ','), '"say ""hi""\r\nbye"', 'RFC 4180: quotes doubled, the line break inside quotes');
  });

  it('numbers stay numbers: a negative meter reading (a bidirectional meter) gets no apostrophe, in en and de', () => {
    const r = booked(settingsIn('Europe/Berlin'), [['2026-02-02T07:00:00Z', -5_000], ['2026-02-02T08:00:00Z', 1_000]]);
    const en = toCsv([{ ...r, label: '-Anna' }], 'en', 2).split('\r\n')[1].split(',');
    assert.deepEqual([en[3], en[14], en[15], en[16], en[17]], ["'-Anna", '-5000', '1000', '6.000', '2.40']);
    const de = toCsv([r], 'de', 2).split('\r\n')[1].split(';');
    assert.deepEqual([de[14], de[16], de[17]], ['-5000', '6,000', '2,40']);
  });
});

describe('ledger attack: money', () => {
  it('rounds half away from zero at every size: large amounts keep their cents, negative credits round away from zero', () => {
    assert.equal(roundMoney(12_345_678_901.125, 2), 12_345_678_901.13);
    assert.equal(roundMoney(100_000_000.123_45, 4), 100_000_000.123_5);
    assert.equal(roundMoney(9_007_199_254.745, 2), 9_007_199_254.75);
    assert.deepEqual([-0.005, -2.675, -1.005, -0.125].map((v) => roundMoney(v, 2)), [-0.01, -2.68, -1.01, -0.13]);
    assert.deepEqual([0.1 + 0.2, 1.005, 2.675, 0.285, 1.255, 8.345].map((v) => roundMoney(v, 2)), [0.3, 1.01, 2.68, 0.29, 1.26, 8.35]);
  });

  it('10 000 sessions of 1 kWh at 0.2999 EUR: each rounded once, the total their sum, and the CSV column adds up to it', () => {
    const tariff = [{ id: 'p', currency: 'EUR', pricePerKWh: 0.2999 }];
    const one = booked(ledgerSettings({ timeZone: 'UTC', tariffs: JSON.stringify(tariff), defaultTariff: 'p' }), [['2026-03-02T10:00:00Z', 0], ['2026-03-02T11:00:00Z', 1_000]]);
    assert.equal(one.cost, 0.3);
    const records = Array.from({ length: 10_000 }, (_, i) => ({ ...one, recordId: `R${i}` }));
    const s = statement({ month: '2026-03', timeZone: 'UTC', records, open: 0, over: true, meta: { exportedAt: null, changes: [] }, costDecimals: 2, mask: false });
    assert.equal(s.total, 3000);
    const column = toCsv(records, 'en', 2).trim().split('\r\n').slice(1).map((l) => l.split(',')[17]);
    assert.equal(sumMoney(column.map(Number), 2), s.total);
    const four = { ...one, cost: roundMoney(0.2999, 4) };
    assert.equal(sumMoney(Array.from({ length: 10_000 }, () => four.cost), 4), 2999);
  });
});

describe('ledger attack: huge numbers', () => {
  it('a meter reading beyond what integer Wh can hold is left out with a warning; the energy stays exact', () => {
    const r = booked(settingsIn('UTC'), [['2026-03-02T10:00:00Z', 0], ['2026-03-02T10:30:00Z', 5_000], ['2026-03-02T10:40:00Z', 1e20], ['2026-03-02T11:00:00Z', 6_000]]);
    assert.deepEqual([r.energyWh, r.meterEndWh, r.cost], [6_000, 6_000, 2.4]);
    assert.ok(Number.isSafeInteger(r.energyWh));
    assert.ok(r.warnings.some((w) => w.includes('out of range')), r.warnings.join('; '));
    const start = booked(settingsIn('UTC'), [['2026-03-02T10:00:00Z', 2 ** 60], ['2026-03-02T11:00:00Z', 2 ** 60 + 10]]);
    assert.ok(Number.isSafeInteger(start.meterStartWh) && Number.isSafeInteger(start.energyWh), `${start.meterStartWh} ${start.energyWh}`);
  });

  it('a CDR with an energy or a cost no number can hold exactly is refused, nothing changed', () => {
    assert.throws(() => parseCdr({ cdrId: 'X', energyKWh: 1e20 }), isCode('INVALID_INPUT'));
    assert.throws(() => parseCdr({ cdrId: 'X', totalCost: 1e20 }), isCode('INVALID_INPUT'));
    assert.equal(parseCdr({ cdrId: 'X', energyKWh: 1_000_000, totalCost: 999_999_999.99 }).totalCost, 999_999_999.99);
  });
});

describe('ledger attack: a statement in two currencies', () => {
  it('EUR and CHF are never added up: the total is null, the totals are per currency, per token too', () => {
    const tariffs = [TOU[0], { id: 'ch', currency: 'CHF', pricePerKWh: 0.5 }];
    const eur = booked(ledgerSettings({ timeZone: 'Europe/Zurich', tariffs: JSON.stringify(tariffs), defaultTariff: 'tou' }), [['2026-03-02T10:00:00Z', 0], ['2026-03-02T11:00:00Z', 6_000]]);
    const chf = { ...eur, recordId: 'R2', currency: 'CHF', cost: 3, tariff: 'ch' };
    const other = { ...eur, recordId: 'R3', token: 'T-2' };
    const s = statement({ month: '2026-03', timeZone: 'Europe/Zurich', records: [eur, chf, other], open: 0, over: true, meta: { exportedAt: null, changes: [] }, costDecimals: 2, mask: false });
    assert.equal(s.currency, 'mixed');
    assert.equal(s.total, null, 'no sum of EUR and CHF');
    assert.deepEqual(s.totals, { CHF: 3, EUR: 4.8 });
    const t1 = s.tokens.find((t) => t.token === 'T-1')!;
    assert.deepEqual([t1.currency, t1.cost, t1.totals], ['mixed', null, { CHF: 3, EUR: 2.4 }]);
    const t2 = s.tokens.find((t) => t.token === 'T-2')!;
    assert.deepEqual([t2.currency, t2.cost, t2.totals], ['EUR', 2.4, { EUR: 2.4 }]);
  });
});

describe('ledger attack: settings as the dialog saves them', () => {
  it('an empty "Cost decimals" field (cleared, or a flow without it) means the default 2, not whole units', () => {
    for (const v of ['', ' ', undefined]) assert.equal(ledgerSettings({ timeZone: 'UTC', costDecimals: v }).costDecimals, 2, JSON.stringify(v));
    assert.deepEqual([0, '0', 3, '4', 5, '2.5'].map((v) => ledgerSettings({ timeZone: 'UTC', costDecimals: v }).costDecimals), [0, 0, 3, 4, 2, 2]);
  });
});

describe('ledger attack: time zones whose changes are not a whole hour (held)', () => {
  const split = (zone: string, tariffs: unknown[], from: string, to: string, wh: number) => {
    const r = booked(settingsIn(zone, tariffs), [[from, 0], [to, wh]]);
    return { r, by: Object.fromEntries(r.segments.map((x) => [x.window, x.energyWh])) };
  };

  it('Lord Howe\'s 30-minute autumn change: the repeated half hour is in its window, durationSec from UTC', () => {
    const w = [{ id: 'tou', currency: 'AUD', pricePerKWh: 0.4, windows: [{ from: '01:00', to: '02:00', pricePerKWh: 0.2 }] }];
    // 00:00 +11:00 to 03:00 +10:30 on 2026-04-05: 3.5 h; 01:00-02:00 local lasts 1.5 h that night.
    const { r, by } = split('Australia/Lord_Howe', w, '2026-04-04T13:00:00Z', '2026-04-04T16:30:00Z', 3_500);
    assert.deepEqual([r.startLocal, r.endLocal, r.durationSec], ['2026-04-05T00:00:00+11:00', '2026-04-05T03:00:00+10:30', 12_600]);
    assert.deepEqual(by, { base: 2_000, '01:00-02:00': 1_500 });
  });

  it('Kathmandu (+05:45), New York\'s autumn Sunday window, Berlin\'s night over both changes, a year end', () => {
    assert.deepEqual(split('Asia/Kathmandu', TOU, '2026-01-31T16:00:00Z', '2026-01-31T16:30:00Z', 1_000).by, { base: 500, '22:00-06:00': 500 });
    const sunday = [{ id: 'tou', currency: 'USD', pricePerKWh: 0.4, windows: [{ days: 'sun', from: '01:00', to: '03:00', pricePerKWh: 0.1 }] }];
    const ny = split('America/New_York', sunday, '2026-11-01T04:00:00Z', '2026-11-01T09:00:00Z', 5_000);
    assert.deepEqual([ny.by, ny.r.endLocal], [{ base: 2_000, '01:00-03:00': 3_000 }, '2026-11-01T04:00:00-05:00']);
    assert.deepEqual(split('Europe/Berlin', TOU, '2026-10-24T20:00:00Z', '2026-10-25T06:00:00Z', 10_000).by, { '22:00-06:00': 9_000, base: 1_000 }, 'a 9-hour night');
    assert.deepEqual(split('Europe/Berlin', TOU, '2026-03-28T21:00:00Z', '2026-03-29T05:00:00Z', 8_000).by, { '22:00-06:00': 7_000, base: 1_000 }, 'a 7-hour night');
    const year = split('Europe/Berlin', TOU, '2026-12-31T22:30:00Z', '2027-01-01T00:30:00Z', 2_000).r;
    assert.deepEqual([year.month, year.endLocal, year.cost], ['2026-12', '2027-01-01T01:30:00+01:00', 0.4]);
  });
});
