/** The progress record of spec §2.2, and the values derived from it. */

/** Spec §2.2. No field is assumed present (spec: "not shown"). */
export interface ProgressRecord {
  eventType?: string;
  timestamp?: string;
  createdAt?: string;
  evseId?: number | string;
  connectorId?: unknown;
  tokenId?: string;
  locationId?: string;
  locationUid?: string;
  transactionData?: {
    transactionId?: string;
    cdrId?: string;
    meterStart?: number;
    meterEnd?: number;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export type MeterUnit = 'Wh' | 'kWh';
export type TimestampZone = 'UTC' | 'local';

export interface DeriveOptions {
  meterUnit?: MeterUnit;
  /** how to read the record's zone-less `timestamp` (spec §2.2) */
  timestampZone?: TimestampZone;
  /** an energy above this is taken for a unit mistake, not a charge: no kWh (default 1000 kWh) */
  maxSessionKWh?: number;
}

/** Values we compute from a record; they go to msg.session, never into the record. */
export interface SessionInfo {
  /** no transactionData yet: the station was asked but has not started */
  pending: boolean;
  transactionId: string | null;
  cdrId: string | null;
  token: string | null;
  locationId: string | null;
  evseId: string | null;
  meterStart: number | null;
  meterEnd: number | null;
  energyKWh: number | null;
  durationSec: number | null;
  startedAt: string | null;
  updatedAt: string | null;
  /** reasons a derived value was left out, for a warning */
  warnings: string[];
}

function own(obj: unknown, key: string): unknown {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return undefined;
  // Own properties only: "__proto__" or "constructor" in a payload must not reach the prototype.
  return Object.prototype.hasOwnProperty.call(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
}

function nonEmptyString(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

function idText(v: unknown): string | null {
  return nonEmptyString(v) ?? (typeof v === 'number' && Number.isFinite(v) ? String(v) : null);
}

function finiteNumber(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** The transactionId of a record (or of any object shaped like one), or null: the one test of "has a transaction". */
export function transactionIdOf(record: unknown): string | null {
  return nonEmptyString(own(own(record, 'transactionData'), 'transactionId'));
}

/** The session has started: the record carries a transactionId. */
export function hasTransaction(record: ProgressRecord | null): boolean {
  return transactionIdOf(record) !== null;
}

/** The billing id of a record (or of a payload shaped like one), for billing after STOP. */
export function cdrIdOf(record: unknown): string | null {
  return nonEmptyString(own(own(record, 'transactionData'), 'cdrId'));
}

/** Parses the record's timestamp, which has no zone designator (spec §2.2). */
export function parseZonelessTimestamp(value: string, zone: TimestampZone): number {
  // If the service ever adds a designator (Z or ±hh:mm), trust it.
  if (hasZoneDesignator(value)) return Date.parse(value);
  if (zone === 'UTC') return Date.parse(`${value}Z`);
  return Date.parse(value); // ECMAScript reads a zone-less date-time as local time
}

/**
 * Ends in Z or ±hh:mm / ±hhmm. Only the last six characters are looked at: an
 * unanchored pattern tried at every position of the string cost more than the
 * parse itself, on every poll of every watched token.
 */
function hasZoneDesignator(value: string): boolean {
  const last = value.charCodeAt(value.length - 1);
  if (last === 0x5a || last === 0x7a) return true; // Z z
  return ZONE_OFFSET.test(value.slice(-6));
}
const ZONE_OFFSET = /[+-]\d{2}:?\d{2}$/;

/** The record's own clock as parsed numbers (NaN where absent or unreadable): createdAt, and timestamp read in `zone`. */
export interface RecordTimes {
  createdMs: number;
  timestampMs: number;
}

/** The last createdAt parsed for one watched token: a session's createdAt is the same on every poll, so it is parsed once. */
export interface CreatedAtCache {
  text: string | null;
  ms: number;
}

export function recordTimes(record: ProgressRecord, zone: TimestampZone = 'UTC', cache?: CreatedAtCache): RecordTimes {
  const created = record.createdAt;
  const createdMs = typeof created !== 'string' ? NaN : cache ? cachedParse(cache, created) : Date.parse(created);
  return { createdMs, timestampMs: typeof record.timestamp === 'string' ? parseZonelessTimestamp(record.timestamp, zone) : NaN };
}

function cachedParse(cache: CreatedAtCache, text: string): number {
  if (cache.text !== text) {
    cache.text = text;
    cache.ms = Date.parse(text);
  }
  return cache.ms;
}

/** kWh between two meter readings in the configured unit. */
export function meterKWh(from: number, to: number, unit: MeterUnit = 'Wh'): number {
  return unit === 'Wh' ? (to - from) / 1000 : to - from;
}

/** The values derived from a record; `times` when the caller has parsed them already (the watcher needs them too). */
export function deriveSession(record: ProgressRecord, opts: DeriveOptions = {}, times?: RecordTimes): SessionInfo {
  const unit = opts.meterUnit ?? 'Wh';
  const zone = opts.timestampZone ?? 'UTC';
  const maxKWh = opts.maxSessionKWh ?? 1000;
  const td = own(record, 'transactionData');
  const warnings: string[] = [];
  const meterStart = finiteNumber(own(td, 'meterStart'));
  const meterEnd = finiteNumber(own(td, 'meterEnd'));

  let energyKWh: number | null = null;
  if (meterStart !== null && meterEnd !== null) {
    const kwh = meterKWh(meterStart, meterEnd, unit);
    if (kwh < 0) warnings.push(`meterEnd (${meterEnd}) is below meterStart (${meterStart}): no energy computed`);
    else if (kwh > maxKWh) warnings.push(`energy of ${kwh} kWh is beyond ${maxKWh} kWh for one session: check the meter unit (now ${unit})`);
    else energyKWh = Math.round(kwh * 1000) / 1000;
  }

  let durationSec: number | null = null;
  const { createdMs: created, timestampMs: now } = times ?? recordTimes(record, zone);
  if (!Number.isNaN(created) && !Number.isNaN(now)) {
    const d = (now - created) / 1000;
    if (d < 0) warnings.push(`timestamp is before createdAt by ${Math.round(-d)} s: no duration computed (check the timestamp zone, now ${zone})`);
    else durationSec = Math.round(d);
  }

  const transactionId = transactionIdOf(record);
  return {
    pending: transactionId === null,
    transactionId,
    cdrId: cdrIdOf(record),
    token: idText(record.tokenId),
    locationId: idText(record.locationId),
    evseId: idText(record.evseId),
    meterStart,
    meterEnd,
    energyKWh,
    durationSec,
    startedAt: typeof record.createdAt === 'string' ? record.createdAt : null,
    updatedAt: typeof record.timestamp === 'string' ? record.timestamp : null,
    warnings,
  };
}

/** A session's record for the books: what msg.session carries on "ended", so that a
 * billing flow books a session from that one message. */
export interface SessionTotals {
  transactionId: string | null;
  cdrId: string | null;
  token: string | null;
  locationId: string | null;
  evseId: string | null;
  /** from the last meter reading seen */
  energyKWh: number | null;
  /** from the last record's own timestamp and createdAt (the service's clock) */
  durationSec: number | null;
  /** the record's createdAt, as the service sent it */
  startedAt: string | null;
  /** when the end was seen, ISO 8601 UTC */
  endedAt: string;
}

/**
 * The totals of an ended session from the values of the last record seen and
 * the wall-clock time the end was seen (wall time: people read it, and it sits
 * beside the service's own timestamps; it times nothing).
 */
export function sessionTotals(last: SessionInfo, endedAtMs: number): SessionTotals {
  return {
    transactionId: last.transactionId,
    cdrId: last.cdrId,
    token: last.token,
    locationId: last.locationId,
    evseId: last.evseId,
    energyKWh: last.energyKWh,
    durationSec: last.durationSec,
    startedAt: last.startedAt,
    endedAt: new Date(endedAtMs).toISOString(),
  };
}
