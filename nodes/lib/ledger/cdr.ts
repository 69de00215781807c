/**
 * A CDR's correction of a record (OCPI): a CDR's energy and cost replace the
 * meter's in a new revision (source `cdr`); the same CDR again changes
 * nothing; a credit CDR reverts the record to the meter values.
 */
import { ChargingError } from '../errors';
import { roundMoney } from './money';
import { priced, type LedgerRecord, type Segment } from './record';

/** The meter's values of a record, kept beside it so that a credit can bring them back. */
export type MeterValues = Pick<LedgerRecord, 'energyWh' | 'energyKWh' | 'segments' | 'cost' | 'currency'>;

export interface CdrInput {
  cdrId: string | null;
  transactionId: string | null;
  energyKWh: number | null;
  totalCost: number | null;
  currency: string | null;
  credit: boolean;
  creditReferenceId: string | null;
}

function field(p: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(p, key) ? p[key] : undefined;
}

/** The largest CDR amount: kWh that stay exact integer Wh, a cost that keeps its minor units. */
const CDR_LIMIT = 1e12;

/** A CDR's amount; a credit CDR carries the credited amounts as negatives (OCPI), which only a credit may. */
function optionalNumber(p: Record<string, unknown>, key: string, credit: boolean): number | null {
  const v = field(p, key);
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || (v < 0 && !credit)) throw new ChargingError('INVALID_INPUT', `cdr: ${key} must be a number of 0 or more (negative only in a credit CDR)`, { field: key });
  if (Math.abs(v) > CDR_LIMIT) throw new ChargingError('INVALID_INPUT', `cdr: ${key} must be at most ${CDR_LIMIT}`, { field: key });
  return v;
}

function optionalText(p: Record<string, unknown>, key: string): string | null {
  const v = field(p, key);
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string' && typeof v !== 'number') throw new ChargingError('INVALID_INPUT', `cdr: ${key} must be a text`, { field: key });
  return String(v).slice(0, 200);
}

export function parseCdr(payload: unknown): CdrInput {
  if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw new ChargingError('INVALID_INPUT', 'cdr: msg.payload must be an object {cdrId | transactionId, energyKWh?, totalCost?, currency?, credit?}', { field: 'payload' });
  const p = payload as Record<string, unknown>;
  const credit = field(p, 'credit');
  if (credit !== undefined && typeof credit !== 'boolean') throw new ChargingError('INVALID_INPUT', 'cdr: credit must be true or false', { field: 'credit' });
  const currency = optionalText(p, 'currency');
  if (currency !== null && !/^[A-Za-z]{3}$/.test(currency)) throw new ChargingError('INVALID_INPUT', 'cdr: currency must be a three-letter code', { field: 'currency' });
  const input: CdrInput = {
    cdrId: optionalText(p, 'cdrId') ?? optionalText(p, 'id'),
    transactionId: optionalText(p, 'transactionId'),
    energyKWh: optionalNumber(p, 'energyKWh', credit === true),
    totalCost: optionalNumber(p, 'totalCost', credit === true),
    currency: currency && currency.toUpperCase(),
    credit: credit === true,
    creditReferenceId: optionalText(p, 'credit_reference_id'),
  };
  if (!input.cdrId && !input.transactionId && !input.creditReferenceId) throw new ChargingError('MISSING_FIELD', 'cdr: msg.payload needs cdrId or transactionId', { field: 'cdrId' });
  return input;
}

/** The ids to look the record up by, in order: a credit's reference first. */
export function cdrLookups(cdr: CdrInput): Array<{ by: 'cdrId' | 'transactionId'; id: string }> {
  const out: Array<{ by: 'cdrId' | 'transactionId'; id: string }> = [];
  if (cdr.credit && cdr.creditReferenceId) out.push({ by: 'cdrId', id: cdr.creditReferenceId });
  if (cdr.cdrId) out.push({ by: 'cdrId', id: cdr.cdrId });
  if (cdr.transactionId) out.push({ by: 'transactionId', id: cdr.transactionId });
  return out;
}

export const meterValues = (r: LedgerRecord): MeterValues => ({ energyWh: r.energyWh, energyKWh: r.energyKWh, segments: r.segments, cost: r.cost, currency: r.currency });

/** Segments scaled to a new energy, priced as before (the CDR's own total, when it has one, replaces the cost). */
function rescaled(segments: Segment[], energyWh: number, decimals: number, currency: string | null): { segments: Segment[]; cost: number | null } {
  if (segments.length === 0 || currency === null) return { segments: [], cost: null };
  const energy = segments.map((s) => ({ window: s.window, pricePerKWh: s.pricePerKWh, wh: Math.max(s.energyWh, 0) + 1e-9 }));
  const p = priced(energy, energyWh, { id: '', currency, pricePerKWh: 0, windows: [] }, decimals);
  return { segments: p.segments, cost: p.cost };
}

/**
 * The currency of a CDR's figures: its own, else the record's. A cost is
 * never without one, and the tariff's prices are never relabelled in
 * another currency: that needs the CDR's own totalCost.
 */
function cdrCurrency(record: LedgerRecord, cdr: CdrInput): string | null {
  const currency = cdr.currency ?? record.currency;
  if (cdr.totalCost !== null && currency === null) throw new ChargingError('MISSING_FIELD', 'cdr: a totalCost needs its currency (the record is priced with no tariff)', { field: 'currency' });
  if (cdr.totalCost === null && record.currency !== null && currency !== record.currency) throw new ChargingError('INVALID_INPUT', 'cdr: a CDR in another currency than the record\'s needs its totalCost', { field: 'totalCost' });
  return currency;
}

/**
 * The record after a CDR, or null when it changes nothing (the same CDR
 * again, a credit of a record that has the meter's values).
 */
export function corrected(record: LedgerRecord, meter: MeterValues, cdr: CdrInput, decimals: number): LedgerRecord | null {
  let next: LedgerRecord;
  if (cdr.credit) {
    if (record.source === 'meter') return null;
    next = { ...record, ...meter, source: 'meter', cdrId: record.cdrId };
  } else {
    const energyWh = cdr.energyKWh === null ? record.energyWh : Math.round(cdr.energyKWh * 1000);
    const currency = cdrCurrency(record, cdr);
    const scaled = rescaled(record.segments, energyWh, decimals, currency);
    const cost = cdr.totalCost !== null ? roundMoney(cdr.totalCost, decimals) : scaled.cost;
    // The CDR's own id names the revision it made: a credit that references it finds the record.
    next = { ...record, cdrId: cdr.cdrId ?? record.cdrId, energyWh, energyKWh: energyWh / 1000, segments: scaled.segments, cost, currency: cost === null ? null : currency, source: 'cdr' };
  }
  const same = next.source === record.source && next.energyWh === record.energyWh && next.cost === record.cost && next.currency === record.currency;
  return same ? null : { ...next, revision: record.revision + 1 };
}
