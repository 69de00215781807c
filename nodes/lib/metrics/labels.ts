/**
 * Label values, every one from a bounded set: a configuration's name, a
 * request kind, an outcome, an error code, a control state, an event. Never
 * a token, a transaction, a URL with credentials or a secret: a series per
 * token would grow without end, and the exposition is read by whoever can
 * reach /metrics.
 */
import type { ChargingErrorCode } from '../errors';
import type { ControlState } from '../control/memory';
import type { WatchEventKind } from '../session/tracker';
import type { RequestKind } from './observers';

/** Every error code, so that a label value is one of them (the record makes the compiler check the list is whole). */
const CODES: Record<ChargingErrorCode, true> = {
  MISSING_FIELD: true,
  INVALID_INPUT: true,
  CONFIG: true,
  AUTH: true,
  HTTP: true,
  RATE_LIMITED: true,
  NETWORK: true,
  TIMEOUT: true,
  OUTCOME_UNKNOWN: true,
  BAD_RESPONSE: true,
  NOT_CONFIRMED: true,
  NOT_STOPPED: true,
  NO_SESSION: true,
  NO_RECORD: true,
  CLOSED: true,
  INTERNAL: true,
};
export const ERROR_CODES = Object.keys(CODES) as ChargingErrorCode[];

/** A code as a label value: one of ERROR_CODES, or INTERNAL for anything else. */
export function codeLabel(code: unknown): ChargingErrorCode {
  return typeof code === 'string' && Object.hasOwn(CODES, code) ? (code as ChargingErrorCode) : 'INTERNAL';
}

export const REQUEST_KINDS: readonly RequestKind[] = ['token', 'start', 'stop', 'progress'];

const STATES: Record<ControlState, true> = { idle: true, queued: true, starting: true, charging: true, stopping: true, guard: true, failed: true, busy: true, done: true };
export const CONTROL_STATES = Object.keys(STATES) as ControlState[];

const EVENTS: Record<WatchEventKind, true> = { pending: true, started: true, updated: true, ended: true, poll: true };
export const WATCH_EVENTS = Object.keys(EVENTS) as WatchEventKind[];

/** The longest configuration label, in characters. */
export const MAX_LABEL_CHARS = 64;

/**
 * A configuration's label: its name as typed, or its node id when it has
 * none (never the service's URL). Credentials written into a URL-like name
 * (`https://user:secret@host`) are taken out, then control characters, then
 * the text is cut: redacted first, then cut, so a cut cannot leave half a
 * secret behind. The expression is linear: each `//` scans only up to the
 * next `/`, `@` or white space.
 */
export function configurationLabel(name: unknown, id: string): string {
  const typed = typeof name === 'string' ? name.trim() : '';
  const text = typed === '' ? id : typed;
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/\/\/[^/@\s]*@/g, '//').replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  const chars = [...clean];
  return (chars.length > MAX_LABEL_CHARS ? chars.slice(0, MAX_LABEL_CHARS).join('') : clean) || id.slice(0, MAX_LABEL_CHARS);
}
