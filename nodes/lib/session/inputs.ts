/**
 * Input resolution: the command fields a node needs, from its own settings
 * first and msg.payload second (DESIGN §2 "Inputs"), checked so that nothing
 * that cannot be sent is ever sent.
 */
import { ChargingError } from '../errors';

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

export function isUnset(v: unknown): boolean {
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
  // A lone surrogate cannot be encoded as UTF-8 or in a URL: refuse it here, not as a "network error" later.
  if (!s.isWellFormed()) {
    throw new ChargingError('INVALID_INPUT', `${field} contains an unpaired UTF-16 surrogate, which cannot be sent (from ${from})`, { field });
  }
  return s;
}

/**
 * The fields a node needs, from the node's own settings first, then msg.payload
 * (or the object `from` names: charging-control reads msg.target, its payload
 * being the wanted state). Throws a ChargingError naming the first field that
 * is missing or invalid.
 */
export function resolveFields<F extends CommandField>(required: readonly F[], nodeFields: NodeFields, payload: unknown, from = 'msg.payload'): Record<F, string> {
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
      throw new ChargingError('MISSING_FIELD', `${field} is required: set it in the node or send it as ${from}.${field}`, { field });
    }
    out[field] = normaliseField(field, found, `${from}.${field}`);
  }
  return out;
}

/**
 * The RFID tokens named by a watch/unwatch message: a string, {token}, a record
 * ({tokenId}), or an array of these. O(n) however many.
 */
export function tokensFrom(payload: unknown): string[] {
  const list = Array.isArray(payload) ? payload : [payload];
  const out: string[] = [];
  for (const item of list) {
    if (typeof item === 'string' && item.trim() !== '') out.push(normaliseField('token', item, 'msg.payload'));
    else if (item && typeof item === 'object') out.push(resolveFields(['token'] as const, {}, item).token);
  }
  return out;
}

/** The location and connector a payload or record names, when present: what a STOP lookup may fill in. */
export function placeOf(p: unknown): NodeFields {
  const out: NodeFields = {};
  for (const k of ['locationId', 'evseId'] as const) {
    const v = own(p, k);
    if (!isUnset(v)) out[k] = v;
  }
  return out;
}
