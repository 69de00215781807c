/**
 * A session's record for the books, built from what watch mode (or the stop
 * node's "make sure it ends") says of it: `started`/`updated` keep an open
 * record (its readings priced as they come), `ended` closes it. Times are the
 * service's (createdAt, the record's timestamp), never the host's; energy is
 * integer Wh; the cost is rounded once.
 */
import { parseZonelessTimestamp } from '../session/record';
import { roundMoney } from './money';
import { maskToken, type LedgerSettings, tariffFor } from './settings';
import { addPair, type Tariff, type WindowEnergy } from './tariff';
import { localIso, monthOf } from './zone';

/** What a watch event or the stop node's output tells of a session (msg.session). */
export interface SessionFacts {
  transactionId: string;
  cdrId: string | null;
  token: string | null;
  locationId: string | null;
  evseId: string | null;
  meterStart: number | null;
  meterEnd: number | null;
  /** createdAt, with its Z */
  startedAt: string | null;
  /** the last record's timestamp (no zone: read in the configured timestamp zone) */
  updatedAt: string | null;
  /** false: the session ended while nobody watched (first poll after a restart or a takeover) */
  endObserved: boolean;
}

/** A session not ended yet, as kept in the store: plain JSON. */
export interface OpenRecord {
  transactionId: string;
  cdrId: string | null;
  token: string | null;
  locationId: string | null;
  evseId: string | null;
  startMs: number;
  meterStartWh: number;
  lastMs: number;
  lastWh: number;
  /** the tariff the session is priced with: the token's when it was opened */
  tariff: Tariff | null;
  energy: WindowEnergy[];
  warnings: string[];
}

export interface Segment {
  window: string;
  pricePerKWh: number;
  energyWh: number;
  /** not rounded: the session's cost is rounded once, from the sum */
  cost: number;
}

export interface LedgerRecord {
  recordId: string;
  revision: number;
  token: string | null;
  label: string;
  vehicle: string;
  locationId: string | null;
  evseId: string | null;
  transactionId: string;
  cdrId: string | null;
  startUtc: string;
  endUtc: string;
  timeZone: string;
  startLocal: string;
  endLocal: string;
  startOffset: string;
  endOffset: string;
  month: string;
  durationSec: number;
  meterStartWh: number;
  meterEndWh: number;
  energyWh: number;
  energyKWh: number;
  endObserved: boolean;
  tariff: string | null;
  segments: Segment[];
  cost: number | null;
  currency: string | null;
  source: 'meter' | 'cdr';
  warnings: string[];
}

/** A meter reading in Wh: integers, whatever the meter's unit. */
export function toWh(value: number, unit: LedgerSettings['meterUnit']): number {
  return unit === 'kWh' ? Math.round(value * 1000) : Math.round(value);
}

function instant(text: string | null, read: (t: string) => number): number | null {
  if (text === null) return null;
  const ms = read(text);
  return Number.isFinite(ms) ? ms : null;
}

/** The reading a facts object carries: (timestamp, meterEnd), null without both. */
function readingOf(facts: SessionFacts, settings: LedgerSettings): { ms: number; wh: number } | null {
  const ms = instant(facts.updatedAt, (t) => parseZonelessTimestamp(t, settings.timestampZone));
  return ms === null || facts.meterEnd === null ? null : { ms, wh: toWh(facts.meterEnd, settings.meterUnit) };
}

/** Opens a record at the session's first event seen (its start: createdAt and meterStart). */
export function openRecord(facts: SessionFacts, settings: LedgerSettings): OpenRecord {
  const warnings: string[] = [];
  const reading = readingOf(facts, settings);
  let startMs = instant(facts.startedAt, Date.parse);
  if (startMs === null) {
    warnings.push('no createdAt: the start is the first reading seen');
    startMs = reading?.ms ?? 0;
  }
  let startWh = facts.meterStart === null ? null : toWh(facts.meterStart, settings.meterUnit);
  if (startWh === null || !Number.isSafeInteger(startWh)) {
    warnings.push('no meterStart in range: the energy counts from the first reading seen');
    startWh = reading && Number.isSafeInteger(reading.wh) ? reading.wh : 0;
  }
  const open: OpenRecord = {
    transactionId: facts.transactionId,
    cdrId: facts.cdrId,
    token: facts.token,
    locationId: facts.locationId,
    evseId: facts.evseId,
    startMs,
    meterStartWh: startWh,
    lastMs: startMs,
    lastWh: startWh,
    tariff: tariffFor(settings, facts.token),
    energy: [],
    warnings,
  };
  return advance(open, facts, settings);
}

/**
 * The open record after one more reading: its energy since the last reading
 * split over the tariff's windows. A reading older than the last (a repeat, a
 * replay after a restart) or with less energy changes nothing but the ids.
 * A new object: the one given may be the store's own.
 */
export function advance(open: OpenRecord, facts: SessionFacts, settings: LedgerSettings): OpenRecord {
  const next: OpenRecord = { ...open, cdrId: open.cdrId ?? facts.cdrId, energy: open.energy.map((e) => ({ ...e })), warnings: [...open.warnings] };
  const reading = readingOf(facts, settings);
  if (reading === null || reading.ms < open.lastMs) return next;
  // Beyond 2^53 Wh integers are no longer exact (and no meter counts that far): garbage, left out.
  if (!Number.isSafeInteger(reading.wh)) {
    if (!next.warnings.some((w) => w.startsWith('a meter reading out of range'))) next.warnings.push('a meter reading out of range was left out');
    return next;
  }
  if (reading.wh > open.lastWh) {
    addPair(next.energy, open.tariff, { ms: open.lastMs, wh: open.lastWh }, reading, settings.timeZone);
    next.lastWh = reading.wh;
  } else if (reading.wh < open.lastWh && !next.warnings.some((w) => w.startsWith('a meter reading'))) {
    next.warnings.push('a meter reading went backwards: it was left out');
  }
  next.lastMs = reading.ms;
  return next;
}

/** Splits `total` integer Wh over the windows in proportion to their energy (largest remainder: the parts add up). */
function integerShares(energy: WindowEnergy[], total: number): number[] {
  const sum = energy.reduce((a, e) => a + e.wh, 0);
  if (sum <= 0) return energy.map(() => 0);
  const exact = energy.map((e) => (e.wh / sum) * total);
  const shares = exact.map(Math.floor);
  let left = total - shares.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, r: x - Math.floor(x) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (let k = 0; left > 0 && k < order.length; k++, left--) shares[order[k].i]++;
  return shares;
}

/** The segments and rounded cost of `energyWh` spread like `energy`; no tariff: no cost. */
export function priced(energy: WindowEnergy[], energyWh: number, tariff: Tariff | null, decimals: number): { segments: Segment[]; cost: number | null; currency: string | null } {
  if (!tariff) return { segments: [], cost: null, currency: null };
  const spread = energy.length > 0 ? energy : [{ window: 'base', pricePerKWh: tariff.pricePerKWh, wh: 1 }];
  const shares = integerShares(spread, energyWh);
  const segments = spread.map((e, i) => ({ window: e.window, pricePerKWh: e.pricePerKWh, energyWh: shares[i], cost: Number(((shares[i] / 1000) * e.pricePerKWh).toFixed(6)) }));
  const exact = segments.reduce((a, s) => a + (s.energyWh / 1000) * s.pricePerKWh, 0);
  return { segments, cost: roundMoney(exact, decimals), currency: tariff.currency };
}

/** The closed record (revision 1, from the meter) of an open record and the facts of its end. */
export function closeRecord(open: OpenRecord, facts: SessionFacts, settings: LedgerSettings): LedgerRecord {
  const last = advance(open, facts, settings);
  const zone = settings.timeZone;
  const start = localIso(last.startMs, zone);
  const end = localIso(last.lastMs, zone);
  const energyWh = Math.max(0, last.lastWh - last.meterStartWh);
  const row = last.token ? settings.tokens.get(last.token) : undefined;
  return {
    recordId: last.transactionId,
    revision: 1,
    token: last.token,
    label: row?.label ?? '',
    vehicle: row?.vehicle ?? '',
    locationId: last.locationId,
    evseId: last.evseId,
    transactionId: last.transactionId,
    cdrId: last.cdrId,
    startUtc: new Date(last.startMs).toISOString(),
    endUtc: new Date(last.lastMs).toISOString(),
    timeZone: zone,
    startLocal: start.text,
    endLocal: end.text,
    startOffset: start.offset,
    endOffset: end.offset,
    month: monthOf(settings.monthBy === 'end' ? last.lastMs : last.startMs, zone),
    // UTC end minus start: a session over the autumn change is not an hour short.
    durationSec: Math.round((last.lastMs - last.startMs) / 1000),
    meterStartWh: last.meterStartWh,
    meterEndWh: last.lastWh,
    energyWh,
    energyKWh: energyWh / 1000,
    endObserved: facts.endObserved,
    tariff: last.tariff?.id ?? null,
    ...priced(last.energy, energyWh, last.tariff, settings.costDecimals),
    source: 'meter',
    warnings: last.warnings,
  };
}

/** The record as reports and CSV show it: the token masked when asked. */
export function shown(record: LedgerRecord, mask: boolean): LedgerRecord {
  return mask && record.token ? { ...record, token: maskToken(record.token, true) } : record;
}
