/**
 * What one progress answer says about a connector, for charging-control: the
 * one place where a record is read as "no session", "pending", "active with
 * transaction X", "elsewhere" or "unreadable". Pure, so that it can be tested
 * on its own (and property-tested).
 */
import type { ProgressRecord } from '../session/record';

/** The connector a control node keeps in a state: one session per (locationId, evseId, token) (spec §1). */
export interface ControlTarget {
  locationId: string;
  evseId: string;
  token: string;
}

export type ProgressView =
  /** no session for the token */
  | { kind: 'none' }
  /** a session without a transaction yet: it may be starting (never START again while it is) */
  | { kind: 'pending' }
  /** energyKWh: the session's energy so far, when the controller could derive it (for the energy limit) */
  | { kind: 'active'; transactionId: string; energyKWh?: number }
  /** the token's session is on another connector: nothing of ours to start or stop here */
  | { kind: 'elsewhere'; locationId: string; evseId: string }
  /** an answer that cannot be read as any of these: nothing is decided on it */
  | { kind: 'unreadable'; why: string };

/** One key per target (state is kept per target). */
export function targetKey(t: ControlTarget): string {
  return JSON.stringify([t.locationId, t.evseId, t.token]);
}

/** The target a key names (the inverse of targetKey), or null for a key that is not one. */
export function targetOf(key: string): ControlTarget | null {
  try {
    const [locationId, evseId, token] = JSON.parse(key) as unknown[];
    return typeof locationId === 'string' && typeof evseId === 'string' && typeof token === 'string' ? { locationId, evseId, token } : null;
  } catch {
    return null;
  }
}

function own(obj: object, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
}

const idText = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : null);

/**
 * The view of a progress answer for a target. `record` is what the client
 * returned: null for no session (404, 204, empty body), else the record as the
 * service sent it. No field is assumed present (spec §2.2 "not shown").
 */
export function viewOf(record: ProgressRecord | null | undefined | unknown, target: ControlTarget): ProgressView {
  if (record === null || record === undefined) return { kind: 'none' };
  if (typeof record !== 'object' || Array.isArray(record)) return { kind: 'unreadable', why: `the answer is ${Array.isArray(record) ? 'an array' : typeof record}, not a progress record` };
  const token = own(record, 'tokenId');
  if (token !== undefined && token !== null && idText(token) !== target.token) return { kind: 'unreadable', why: `the record is for RFID token ${String(idText(token) ?? typeof token)}, not ${target.token}` };
  const locationId = idText(own(record, 'locationId'));
  const evseId = idText(own(record, 'evseId'));
  if ((locationId !== null && locationId !== target.locationId) || (evseId !== null && evseId !== target.evseId)) {
    return { kind: 'elsewhere', locationId: locationId ?? target.locationId, evseId: evseId ?? target.evseId };
  }
  const data = own(record, 'transactionData');
  // DESIGN §3: no transactionData yet means the session is still pending.
  if (data === undefined || data === null) return { kind: 'pending' };
  if (typeof data !== 'object' || Array.isArray(data)) return { kind: 'unreadable', why: 'transactionData is not an object' };
  const tx = own(data, 'transactionId');
  if (tx === undefined || tx === null || tx === '') return { kind: 'pending' };
  if (typeof tx !== 'string') return { kind: 'unreadable', why: `transactionId is ${typeof tx}, not a string` };
  return { kind: 'active', transactionId: tx };
}
