import { ChargingError } from './errors';

/** Spec §2.1, key order as the spec lists the fields. */
export interface ChargingCommand {
  action: 'START' | 'STOP';
  locationId: string;
  evseId: string;
  token: string;
  transactionId?: string;
}

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

export type CommandField = 'locationId' | 'evseId' | 'token' | 'transactionId';

/** Values set in the node itself; undefined or '' means "read it from msg.payload". */
export type NodeFields = Partial<Record<CommandField, unknown>>;

/** Longest identifier we send; a generous bound that stops a pasted blob, not a real id. */
export const MAX_FIELD_LENGTH = 256;

function own(obj: unknown, key: string): unknown {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return undefined;
  // Own properties only: "__proto__" or "constructor" in a payload must not reach the prototype.
  return Object.prototype.hasOwnProperty.call(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
}

/**
 * Where each command field may come from in msg.payload, in order. The second
 * names are the progress record's (DESIGN §2 "Chaining"): so that a record from
 * charging-progress can feed charging-stop with no function node between.
 */
const PAYLOAD_SOURCES: Record<CommandField, Array<(p: unknown) => unknown>> = {
  locationId: [(p) => own(p, 'locationId')],
  evseId: [(p) => own(p, 'evseId')],
  token: [(p) => own(p, 'token'), (p) => own(p, 'tokenId')],
  transactionId: [(p) => own(p, 'transactionId'), (p) => own(own(p, 'transactionData'), 'transactionId')],
};

function isUnset(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
}

/**
 * One command field as a string, or a ChargingError naming it. Numbers are
 * accepted where the service itself uses them (evseId in the record); anything
 * else that is not a string is refused rather than guessed at.
 */
export function normaliseField(field: CommandField, value: unknown, from: string): string {
  let s: string;
  if (typeof value === 'string') {
    s = value.trim();
  } else if (typeof value === 'number' && Number.isFinite(value) && (field === 'evseId' || field === 'transactionId')) {
    s = String(value);
  } else {
    const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    throw new ChargingError('INVALID_INPUT', `${field} must be a string (got ${kind} from ${from})`, { field });
  }
  if (s === '') throw new ChargingError('MISSING_FIELD', `${field} is empty (from ${from})`, { field });
  if (s.length > MAX_FIELD_LENGTH) {
    throw new ChargingError('INVALID_INPUT', `${field} is ${s.length} characters long; at most ${MAX_FIELD_LENGTH} are accepted`, { field });
  }
  // Control characters never belong in an identifier and would corrupt logs.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(s)) {
    throw new ChargingError('INVALID_INPUT', `${field} contains control characters`, { field });
  }
  return s;
}

/**
 * The fields a node needs, from the node's own settings first, then msg.payload.
 * Throws a ChargingError naming the first field that is missing or invalid.
 */
export function resolveFields<F extends CommandField>(required: readonly F[], nodeFields: NodeFields, payload: unknown): Record<F, string> {
  const out = {} as Record<F, string>;
  for (const field of required) {
    const set = nodeFields[field];
    if (!isUnset(set)) {
      out[field] = normaliseField(field, set, 'the node');
      continue;
    }
    let found: unknown;
    for (const source of PAYLOAD_SOURCES[field]) {
      found = source(payload);
      if (!isUnset(found)) break;
    }
    if (isUnset(found)) {
      throw new ChargingError('MISSING_FIELD', `${field} is required: set it in the node or send it as msg.payload.${field}`, { field });
    }
    out[field] = normaliseField(field, found, `msg.payload.${field}`);
  }
  return out;
}

export function startCommand(f: { locationId: string; evseId: string; token: string }): ChargingCommand {
  // Spec §4.1: START sends locationId, evseId and token, and never transactionId.
  return { action: 'START', locationId: f.locationId, evseId: String(f.evseId), token: f.token };
}

export function stopCommand(f: { locationId: string; evseId: string; token: string; transactionId: string }): ChargingCommand {
  return { action: 'STOP', locationId: f.locationId, evseId: String(f.evseId), token: f.token, transactionId: f.transactionId };
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

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : null;
}

function int(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** Parses the record's timestamp, which has no zone designator (spec §2.2). */
export function parseZonelessTimestamp(value: string, zone: TimestampZone): number {
  // If the service ever adds a designator (Z or ±hh:mm), trust it.
  if (/([zZ]|[+-]\d{2}:?\d{2})$/.test(value)) return Date.parse(value);
  if (zone === 'UTC') return Date.parse(`${value}Z`);
  return Date.parse(value); // ECMAScript reads a zone-less date-time as local time
}

export function deriveSession(record: ProgressRecord, opts: DeriveOptions = {}): SessionInfo {
  const unit = opts.meterUnit ?? 'Wh';
  const zone = opts.timestampZone ?? 'UTC';
  const maxKWh = opts.maxSessionKWh ?? 1000;
  const td = record.transactionData && typeof record.transactionData === 'object' ? record.transactionData : undefined;
  const warnings: string[] = [];
  const meterStart = int(td?.meterStart);
  const meterEnd = int(td?.meterEnd);

  let energyKWh: number | null = null;
  if (meterStart !== null && meterEnd !== null) {
    const delta = meterEnd - meterStart;
    const kwh = unit === 'Wh' ? delta / 1000 : delta;
    if (kwh < 0) warnings.push(`meterEnd (${meterEnd}) is below meterStart (${meterStart}): no energy computed`);
    else if (kwh > maxKWh) warnings.push(`energy of ${kwh} kWh is beyond ${maxKWh} kWh for one session: check the meter unit (now ${unit})`);
    else energyKWh = Math.round(kwh * 1000) / 1000;
  }

  let durationSec: number | null = null;
  const created = typeof record.createdAt === 'string' ? Date.parse(record.createdAt) : NaN;
  const now = typeof record.timestamp === 'string' ? parseZonelessTimestamp(record.timestamp, zone) : NaN;
  if (!Number.isNaN(created) && !Number.isNaN(now)) {
    const d = (now - created) / 1000;
    if (d < 0) warnings.push(`timestamp is before createdAt by ${Math.round(-d)} s: no duration computed (check the timestamp zone, now ${zone})`);
    else durationSec = Math.round(d);
  }

  return {
    pending: td === undefined || str(td.transactionId) === null,
    transactionId: str(td?.transactionId),
    cdrId: str(td?.cdrId),
    token: str(record.tokenId),
    locationId: str(record.locationId),
    evseId: str(record.evseId),
    meterStart,
    meterEnd,
    energyKWh,
    durationSec,
    startedAt: typeof record.createdAt === 'string' ? record.createdAt : null,
    updatedAt: typeof record.timestamp === 'string' ? record.timestamp : null,
    warnings,
  };
}
