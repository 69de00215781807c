/**
 * Every body the service sends, read within limits: redacted before anything
 * else looks at it, then parsed and depth-checked (a success body), or cut to
 * one short line of the service's own words (an error body). Linear in the
 * body's size: a body may be 1 MiB.
 */
import { ChargingError } from '../errors';
import type { Redactor } from './redactor';

/** Deepest JSON accepted. A progress record is 2 levels deep; Node-RED's message clone overflows its stack in the thousands. */
export const MAX_JSON_DEPTH = 64;
/** Longest service text kept in an error message, after redaction. */
export const MAX_SERVICE_TEXT = 300;

const NON_BLANK = /\S/;

/**
 * A success body as a value: secrets scrubbed before parsing (a service that
 * echoes our Authorization header must not put the token into msg.payload),
 * then parsed and refused if nested deeper than MAX_JSON_DEPTH. Null for an
 * empty body. Throws BAD_RESPONSE for text that is not JSON.
 */
export function readJson(text: string, redactor: Redactor, what: string, status: number): unknown {
  // A test, not text.trim(): that copied every body once more.
  if (!NON_BLANK.test(text)) return null;
  const clean = redactor.redact(text);
  let value: unknown;
  try {
    value = JSON.parse(clean) as unknown;
  } catch {
    throw new ChargingError('BAD_RESPONSE', `${what}: the service answered ${status} with a body that is not valid JSON (${text.length} bytes)`, { statusCode: status });
  }
  if (tooDeep(value, 1)) {
    throw new ChargingError('BAD_RESPONSE', `${what}: the service answered ${status} with JSON nested deeper than ${MAX_JSON_DEPTH} levels; it was not passed on`, { statusCode: status });
  }
  // A \u escape can spell a secret that the text did not show: look again at the parsed value.
  if (clean.includes('\\u')) {
    const again = JSON.stringify(value);
    if (redactor.matches(again)) value = JSON.parse(redactor.redact(again)) as unknown;
  }
  return value;
}

function tooDeep(v: unknown, depth: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (depth > MAX_JSON_DEPTH) return true;
  if (Array.isArray(v)) {
    for (const x of v) if (tooDeep(x, depth + 1)) return true;
    return false;
  }
  for (const k in v) if (tooDeep((v as Record<string, unknown>)[k], depth + 1)) return true;
  return false;
}

/**
 * The service's error body as one short line: redacted first, then the usual
 * message fields picked out of JSON, whitespace collapsed, and only then cut,
 * so that no part of a secret survives the cut.
 */
export function describeBody(text: string | null, redactor: Redactor): string | undefined {
  if (text === null || text.trim() === '') return undefined;
  const clean = redactor.redact(text);
  let summary = clean;
  try {
    summary = messageFields(JSON.parse(clean) as unknown, 0) ?? clean;
  } catch {
    // not JSON: the text itself
  }
  // JSON.parse undoes escapes (\" \u0041 ...): what it produced is redacted again.
  const line = oneLine(redactor.redact(summary), MAX_SERVICE_TEXT + 1);
  if (line === '') return undefined;
  return line.length > MAX_SERVICE_TEXT ? `${line.slice(0, MAX_SERVICE_TEXT)}…` : line;
}

/**
 * The first `limit` characters of the text with each run of whitespace made
 * one space, leading whitespace dropped. A loop that stops at the limit:
 * `replace(/\s+/g, ' ')` rebuilt the whole of a 1 MiB body of " a a a…" for
 * 300 characters (0.2 s of a blocked event loop).
 */
function oneLine(text: string, limit: number): string {
  let out = '';
  let i = 0;
  while (i < text.length && out.length < limit) {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    let j = i;
    while (j < text.length && j - i < limit && !isSpace(text.charCodeAt(j))) j++;
    if (j > i) out += (out === '' ? '' : ' ') + text.slice(i, j);
    i = j;
  }
  return out.slice(0, limit);
}

/** The characters of a regex's `\s`. */
function isSpace(c: number): boolean {
  return (c >= 9 && c <= 13) || c === 32 || c === 160 || c === 5760 || (c >= 8192 && c <= 8202) || c === 8232 || c === 8233 || c === 8239 || c === 8287 || c === 12288 || c === 65279;
}

const MESSAGE_KEYS = ['error', 'error_description', 'message', 'detail', 'title', 'description'];

/** The usual message fields of a JSON error body, a few levels deep at most. */
export function messageFields(body: unknown, depth: number): string | undefined {
  if (typeof body === 'string') return body;
  if (body === null || typeof body !== 'object' || Array.isArray(body) || depth > 2) return undefined;
  const o = body as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of MESSAGE_KEYS) {
    const v = o[key];
    if (typeof v === 'string' && v.trim() !== '') parts.push(v.trim());
    else if (v && typeof v === 'object') {
      const nested = messageFields(v, depth + 1);
      if (nested) parts.push(nested);
    }
  }
  return parts.length > 0 ? parts.join(': ') : undefined;
}
