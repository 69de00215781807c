/**
 * What a watched token's polls mean, as a pure step: the token's state and one
 * confirmed poll answer in, the next state and the events out. No I/O, no
 * timers and no clock of its own (the time is passed in), and the state given
 * is never changed, so that a caller may hold the next state back (until it
 * is committed elsewhere) and simply keep the old one if that fails.
 */
import { CreatedAtCache, deriveSession, DeriveOptions, meterKWh, ProgressRecord, recordTimes, SessionInfo, SessionTotals, sessionTotals } from './record';
import { transition } from './lifecycle';
import { estimatePower, PowerSamples } from './power';

export type WatchEventKind =
  | 'pending' // a session appeared, not started yet (no transactionId)
  | 'started' // the session has a transactionId
  | 'updated' // the meter advanced
  | 'ended' // the session is no longer found
  | 'poll'; // a poll with no change (only when every poll is asked for)

export interface WatchedSession extends SessionInfo {
  /** kW over the readings of the last 10 s or a little more; null until there are two */
  powerKW: number | null;
}

/**
 * On 'ended': the last values seen, with the session's totals (endedAt: when
 * the end was seen). endObserved false: the end was found by the first poll
 * after a restart or a takeover, so it happened while nobody watched and the
 * last values are older than the end.
 */
export type EndedSession = WatchedSession & SessionTotals & { endObserved: boolean };

export interface WatchEvent {
  token: string;
  event: WatchEventKind;
  /** the record as the service returned it, or null when the session is gone */
  record: ProgressRecord | null;
  /** an EndedSession on 'ended' */
  session: WatchedSession | EndedSession | null;
}

/**
 * What a watcher keeps of a token across redeploys and restarts: enough to
 * decide the next event (nothing when unchanged, `updated`, `ended` once,
 * `started` for a new transaction). Absent: no session seen (or it ended).
 * Plain JSON, so that any context store can keep it.
 */
export interface SavedState {
  transactionId: string | null;
  meterEnd: number | null;
  /** the last values seen: what `ended` carries when the session ended while Node-RED was down */
  session: WatchedSession | null;
}

/** One token's state. Never changed in place: step makes a new one. */
export interface TrackerState {
  readonly token: string;
  /** a session (pending or with a transaction) was seen and has not ended */
  readonly seen: boolean;
  readonly transactionId: string | null;
  readonly meterEnd: number | null;
  /** the last values seen: the tracker's own copy, not the object an event carried (a flow may edit that one) */
  readonly last: Readonly<WatchedSession> | null;
  /** meter readings for the power estimate */
  readonly samples: PowerSamples | null;
  /**
   * The session's createdAt as last parsed: a memo of a parse, shared by all
   * the states of a token (it changes no outcome, only saves parsing a
   * createdAt that is the same on every poll).
   */
  readonly created: CreatedAtCache;
  /** made from a saved state and not polled since: an end found now was not observed as it happened */
  readonly resumed?: boolean;
}

export interface TrackerOptions {
  /** emit 'poll' events for polls that changed nothing */
  emitEveryPoll?: boolean;
  derive?: DeriveOptions;
}

export interface Step {
  state: TrackerState;
  events: WatchEvent[];
}

/** A token's first state: nothing seen, or what was saved before a redeploy or restart. */
export function trackerState(token: string, saved?: SavedState): TrackerState {
  const created = { text: null, ms: NaN };
  if (!saved) return { token, seen: false, transactionId: null, meterEnd: null, last: null, samples: null, created };
  // A copy: the loaded object is the saved state's.
  const last = saved.session && { ...saved.session };
  return { token, seen: true, transactionId: saved.transactionId, meterEnd: saved.meterEnd, last, samples: null, created, resumed: true };
}

/** Whether two states decide the next event differently (what a restart or another replica must be told). */
export function decidesDifferently(a: TrackerState, b: TrackerState): boolean {
  return a.seen !== b.seen || a.transactionId !== b.transactionId || a.meterEnd !== b.meterEnd;
}

/** The state as kept across restarts (a copy: the tracker's own objects stay its own); null when no session is seen. */
export function savedState(state: TrackerState): SavedState | null {
  return state.seen ? { transactionId: state.transactionId, meterEnd: state.meterEnd, session: state.last && { ...state.last } } : null;
}

/**
 * A confirmed poll answer (null: no session) turned into zero or more events
 * (the lifecycle table, lifecycle.ts) and the next state. `wallNow`: the wall
 * clock now, for `endedAt` and for a power reading whose record has no
 * timestamp of its own.
 */
export function step(state: TrackerState, record: ProgressRecord | null, wallNow: number, options: TrackerOptions): Step {
  const events: WatchEvent[] = [];
  const token = state.token;
  if (record === null) {
    if (transition(state, null).ends) {
      events.push(ended(state, wallNow));
      return { state: cleared(state), events };
    }
    if (options.emitEveryPoll) events.push({ token, event: 'poll', record: null, session: null });
    return { state, events };
  }
  // Parsed once, for the derived values and for the power estimate.
  const times = recordTimes(record, options.derive?.timestampZone, state.created);
  const info = deriveSession(record, options.derive, times);
  const change = transition(state, info);
  let base = state;
  if (change.ends) {
    // Another session on the same token since the last poll (a new transaction, or one still pending): the old one ended.
    events.push(ended(state, wallNow));
    base = cleared(state);
  }
  // deriveSession's object is this poll's own: completed in place rather than copied.
  const session = info as WatchedSession;
  const lastKW = base.last?.powerKW ?? null;
  let samples = base.samples;
  if (info.energyKWh === null || info.meterStart === null || info.meterEnd === null) {
    session.powerKW = lastKW;
  } else {
    const ownClock = !Number.isNaN(times.timestampMs);
    const kwh = meterKWh(info.meterStart, info.meterEnd, options.derive?.meterUnit);
    const power = estimatePower(samples, lastKW, { at: ownClock ? times.timestampMs : wallNow, ownClock, kwh });
    session.powerKW = power.kw;
    samples = power.samples;
  }
  const kind: WatchEventKind | null = change.event ?? (options.emitEveryPoll ? 'poll' : null);
  const next: TrackerState = { token, seen: true, transactionId: info.transactionId, meterEnd: info.meterEnd, last: kept(base.last, session), samples, created: state.created };
  if (kind) events.push({ token, event: kind, record, session });
  return { state: next, events };
}

/** The ended event: the last values seen and the totals, endedAt by the wall clock (people read it). */
function ended(state: TrackerState, wallNow: number): WatchEvent {
  const session: EndedSession | null = state.last && { ...state.last, ...sessionTotals(state.last, wallNow), endObserved: state.resumed !== true };
  return { token: state.token, event: 'ended', record: null, session };
}

function cleared(state: TrackerState): TrackerState {
  return { token: state.token, seen: false, transactionId: null, meterEnd: null, last: null, samples: null, created: state.created };
}

/**
 * The session's values as the state keeps them. A copy: the event's object
 * goes into a flow, where a function node may edit msg.session in place, and
 * what the state keeps decides the next event, the state saved for restarts
 * and what ended carries. A field whose value did not change keeps the value
 * already held (the warnings are a new, usually empty, list on every poll),
 * and when nothing changed the kept object itself is kept.
 */
function kept(last: Readonly<WatchedSession> | null, session: WatchedSession): Readonly<WatchedSession> {
  if (last === null) return { ...session };
  const held = last as unknown as Record<string, unknown>;
  const from = session as unknown as Record<string, unknown>;
  let next: Record<string, unknown> | null = null;
  for (const k in from) {
    const v = from[k];
    if (held[k] === v || sameList(held[k], v)) continue;
    next ??= { ...held };
    next[k] = v;
  }
  return next ? (next as unknown as WatchedSession) : last;
}

/** Two arrays of the same items. */
function sameList(a: unknown, b: unknown): boolean {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
