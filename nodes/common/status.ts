/**
 * The one status helper: the vocabulary every node uses for its badge, and a
 * board per node that coalesces updates. Under load a node may change state
 * thousands of times a second; Node-RED queues every update for every editor
 * connection, so the board shows at most one update per STATUS_GAP_MS,
 * always the latest, and the last state of a burst is never lost.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Node } from 'node-red';
import { ChargingError, isChargingError } from '../lib/errors';
import { monotonicNow } from '../lib/clock';

/**
 * A badge: colour and shape, and its text as a key of the "status" catalog in
 * nodes/locales/<lang>/charging-service.json with values to fill in. The text
 * is translated (in Node-RED's runtime language) only when the board shows it,
 * at most four times a second, not for every message.
 */
export interface NodeStatus {
  fill?: 'red' | 'green' | 'yellow' | 'blue' | 'grey';
  shape?: 'ring' | 'dot';
  key?: StatusKey;
  values?: Record<string, string | number>;
  /** append the time of the change when shown */
  stamp?: boolean;
  /** values that are texts of the catalog themselves, translated before they are filled in (a badge of parts: "on → charging") */
  words?: Record<string, StatusKey>;
}

/** Every text a badge can show (the catalogs must have each, in every language: a test checks). */
export const STATUS_KEYS = [
  'starting',
  'stopping',
  'querying',
  'lookingUp',
  'startAccepted',
  'startAcceptedStatus',
  'stopAccepted',
  'stopAcceptedStatus',
  'started',
  'sessionEnded',
  'charging',
  'noSession',
  'pending',
  'waitingStart',
  'waitingEnd',
  'startNotConfirmed',
  'stopNotConfirmed',
  'stoppingAttempt',
  'sentByReplica',
  'fleetDown',
  'watchingFleet',
  'watching',
  'watchingEnergy',
  'watchingEvent',
  'watchingEnded',
  'control.badge',
  'control.badgeTargets',
  'control.waiting',
  'control.on',
  'control.off',
  'control.endedAtStation',
  'control.twoNodes',
  'control.state.idle',
  'control.state.starting',
  'control.state.charging',
  'control.state.stopping',
  'control.state.guard',
  'control.state.failed',
  'control.state.busy',
  'control.state.done',
  'error.missingField',
  'error.invalidInput',
  'error.http',
  'error.authFailed',
  'error.authFailedStatus',
  'error.outcomeUnknown',
  'error.rateLimited',
  'error.timeout',
  'error.network',
  'error.networkCause',
  'error.badResponse',
  'error.notConfirmed',
  'error.notStopped',
  'error.noSession',
  'error.config',
  'error.closed',
  'error.internal',
  'error.other',
] as const;
export type StatusKey = (typeof STATUS_KEYS)[number];

/** At most this many ms between two updates of one node's badge (4 per second). */
export const STATUS_GAP_MS = 250;
/**
 * A watch node's badge changes at most once a second: it reports an event per
 * poll, its clock shows whole seconds, and each delayed update is a wake-up of
 * the process of its own (four a second were one for every 2.5 polls of a node
 * watching 100 tokens at 10 s).
 */
export const WATCH_STATUS_GAP_MS = 1000;

type Values = NodeStatus['values'];
export const Status = {
  requesting: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'blue', shape: 'dot', key, values }),
  waiting: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'blue', shape: 'ring', key, values }),
  ok: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'green', shape: 'dot', key, values, stamp: true }),
  idle: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'grey', shape: 'ring', key, values, stamp: true }),
  warn: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'yellow', shape: 'ring', key, values }),
  error: (err: unknown): NodeStatus => ({ fill: 'red', shape: 'ring', ...badgeReason(err) }),
};

/** A few words for a red badge, never a secret. */
export function badgeReason(err: unknown): { key: StatusKey; values?: Values } {
  if (!isChargingError(err)) return { key: 'error.other' };
  const e: ChargingError = err;
  switch (e.code) {
    case 'MISSING_FIELD':
      return { key: 'error.missingField', values: { field: e.field ?? 'field' } };
    case 'INVALID_INPUT':
      return { key: 'error.invalidInput', values: { field: e.field ?? 'input' } };
    case 'HTTP':
      return { key: 'error.http', values: { status: e.statusCode ?? '' } };
    case 'AUTH':
      return e.statusCode ? { key: 'error.authFailedStatus', values: { status: e.statusCode } } : { key: 'error.authFailed' };
    case 'OUTCOME_UNKNOWN':
      return { key: 'error.outcomeUnknown' };
    case 'RATE_LIMITED':
      return { key: 'error.rateLimited' };
    case 'TIMEOUT':
      return { key: 'error.timeout' };
    case 'NETWORK':
      return e.causeCode ? { key: 'error.networkCause', values: { cause: e.causeCode } } : { key: 'error.network' };
    case 'BAD_RESPONSE':
      return { key: 'error.badResponse' };
    case 'NOT_CONFIRMED':
      return { key: 'error.notConfirmed' };
    case 'NOT_STOPPED':
      return { key: 'error.notStopped' };
    case 'NO_SESSION':
      return { key: 'error.noSession' };
    case 'CONFIG':
      return { key: 'error.config' };
    case 'CLOSED':
      return { key: 'error.closed' };
    case 'INTERNAL':
      return { key: 'error.internal' };
  }
}

type Translate = (key: StatusKey, values?: Values) => string;

/** The English catalog that ships with the package (dist/nodes/locales), read once; empty if it cannot be read. */
function readEnglishCatalog(): unknown {
  try {
    const file = path.join(__dirname, '..', 'locales', 'en-US', 'charging-service.json');
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as { 'charging-service': { status: unknown } })['charging-service'].status;
  } catch {
    // a damaged install: badges show their keys rather than the node failing to load
    return {};
  }
}

const englishCatalog = readEnglishCatalog();
const englishTemplate = (key: string): string | null => {
  const text = lookUp(englishCatalog, key);
  return typeof text === 'string' ? text : null;
};
const english: Translate = (key, values = {}) => {
  const text = englishTemplate(key);
  return text === null ? key : fill(text, values);
};

function lookUp(catalog: unknown, key: string): unknown {
  return key.split('.').reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), catalog);
}

/** i18next's placeholders, __name__, filled in one pass (a value is never read as a placeholder). */
function fill(template: string, values: NonNullable<Values>): string {
  return template.replace(/__(\w+)__/g, (m, name: string) => (name in values ? String(values[name]) : m));
}

let translate: Translate = english;

/**
 * Badges in Node-RED's runtime language: called by the configuration node's
 * module with its RED._ (the "status" catalog is in charging-service.json).
 * Where the runtime has no catalog for us (RED._ hands the key back, as the
 * test helper's does), the English catalog fills in.
 */
export function useRuntimeLanguage(runtime: (key: string, values?: Values) => string): void {
  // One runtime look-up per key, not per badge: i18next takes ~0.5 ms a call
  // (plural rules for __count__), which a watch node showing four badges a
  // second paid on every one. The key is asked for with each
  // placeholder standing for itself, so the runtime hands back its template in
  // its language; the values are filled in here. The catalogs have no plural forms.
  const templates = new Map<string, string | null>();
  translate = (key, values = {}) => {
    let template = templates.get(key);
    if (template === undefined) {
      const full = `charging-service.status.${key}`;
      const own: Record<string, string> = {};
      for (const m of (englishTemplate(key) ?? '').matchAll(/__(\w+)__/g)) own[m[1]] = `__${m[1]}__`;
      const text = runtime(full, own);
      template = text && text !== full ? text : null;
      templates.set(key, template);
    }
    return template === null ? english(key, values) : fill(template, values);
  };
}

/** Energy for a badge: Wh below 1 kWh (a 0.05 kWh threshold must not read "0.0 kWh"), else kWh. */
export function formatEnergy(kwh: number | null): string {
  if (kwh === null) return '';
  if (kwh < 1) return `${Math.round(kwh * 1000)} Wh`;
  return kwh >= 100 ? `${kwh.toFixed(0)} kWh` : `${kwh.toFixed(1)} kWh`;
}

/** HH:MM:SS local time. Not toTimeString(): that also formats the zone's name, on every badge a watch node shows, and a watch node shows one per poll. */
function clock(now: Date): string {
  return `${two(now.getHours())}:${two(now.getMinutes())}:${two(now.getSeconds())}`;
}

const two = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** One node's badge, coalesced. */
export class StatusBoard {
  private lastShown = -Infinity;
  private gapMs = STATUS_GAP_MS;
  private pending: NodeStatus | (() => NodeStatus) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly node: Pick<Node, 'status'>,
    private readonly now: () => number = monotonicNow,
  ) {}

  /**
   * The badge to show, or a function that makes it: called only when the board
   * shows it (a watch node reports an event per poll, its board shows one a second).
   */
  set(status: NodeStatus | (() => NodeStatus)): void {
    if (this.closed) return;
    const now = this.now();
    if (this.timer === null && now - this.lastShown >= this.gapMs) {
      this.show(status, now);
      return;
    }
    // Too soon: keep only the latest, and show it when the gap has passed.
    this.pending = status;
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.gapMs - (now - this.lastShown));
      this.timer.unref?.();
    }
  }

  /**
   * Like set(), but arms no timer when it is too soon: the badge waits for the
   * next set() or due(). A watch node calls due() on each tick of its watcher
   * (at least once a second while it watches anything), so its badge costs no
   * wake-up of the process of its own: the timer set() arms was 0.1 wake-ups
   * per poll at 100 tokens. Only for a caller that calls due().
   */
  defer(status: NodeStatus | (() => NodeStatus)): void {
    if (this.closed) return;
    const now = this.now();
    if (this.timer === null && now - this.lastShown >= this.gapMs) return this.show(status, now);
    this.pending = status;
  }

  /** Shows a deferred badge once the gap has passed (a pending set() has its own timer). */
  due(): void {
    if (this.pending !== null && this.timer === null && this.now() - this.lastShown >= this.gapMs) this.flush();
  }

  /** At most one update per `ms` from now on (a watch node: see WATCH_STATUS_GAP_MS). */
  setGap(ms: number): void {
    this.gapMs = ms;
  }

  /** Clears the badge and stops; nothing is shown afterwards. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
    this.node.status({});
  }

  private flush(): void {
    this.timer = null;
    const status = this.pending;
    this.pending = null;
    if (status && !this.closed) this.show(status, this.now());
  }

  private show(next: NodeStatus | (() => NodeStatus), now: number): void {
    this.lastShown = now;
    const { stamp, key, values, fill, shape, words } = typeof next === 'function' ? next() : next;
    if (key === undefined) return this.node.status({ fill, shape });
    const all = words ? { ...values } : values;
    for (const [name, word] of Object.entries(words ?? {})) (all as Record<string, string>)[name] = translate(word).trim();
    const text = translate(key, all).trim().replace(/\s{2,}/g, ' ');
    this.node.status({ fill, shape, text: stamp ? `${text} · ${clock(new Date())}` : text });
  }
}
