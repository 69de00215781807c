/**
 * The rules of charging-control, as transitions of one target's memory with no
 * I/O and no clock of their own: a wish arrives (applyWish), progress is read
 * (observe), and what should be is compared with what is (decide), as evcc's
 * loadpoint does every cycle. The controller (controller.ts) runs them.
 */
import { ChargingError } from '../errors';
import { type Action, type ControlMemory, type ControlSettings, type ControlState, startWindowMs } from './memory';
import type { ProgressView } from './view';

const mmss = (ms: number): string => {
  const sec = Math.ceil(ms / 1000);
  return `${Math.floor(sec / 60)}:${String(sec % 60).padStart(2, '0')}`;
};
const secs = (ms: number): string => `${Math.round(ms / 100) / 10} s`;

export const NO_SESSION_AFTER_START = 'no session after START — is the car plugged in?';
export const ENDED_AT_STATION = 'ended at the station';
export const OTHER_SENDER = 'another process sends the commands for this connector: watching only';

export interface WishOptions {
  /** with off: the STOP does not wait for the guard */
  force?: boolean;
  /** with on: start again after an end at the station, after failed, busy or done */
  restart?: boolean;
  /** with on: stop when the session has taken this many kWh (null: no limit; absent: the node's setting) */
  energyLimit?: number | null;
  /** with on: the wish's priority in a depot's queue (absent: as it was for this wish, else the node's) */
  priority?: number;
}

export interface Decision {
  state: ControlState;
  /** one line: why the target is in this state */
  reason: string;
  /** the command to send now (the state is the one after sending it) */
  send?: { action: 'START' } | { action: 'STOP'; transactionId: string };
  /** ms until the next check */
  nextMs: number;
  /** the command's number in its round, and how many at most (badge "stopping 2/3") */
  attempt?: { n: number; of: number };
  /** in guard: ms left */
  guardLeftMs?: number;
  /** failed or busy while on is wanted: ms until the next START may go (the retry, or the bound on STARTs) */
  startInMs?: number;
  /** to Catch as well as on the output: a session that did not stop */
  error?: ChargingError;
}

function newRound(m: ControlMemory): void {
  m.round = null;
  m.attempts = 0;
  m.failed = null;
}

/** A wish as it came, for "the same wish again" (energyLimit absent and null differ: absent means the node's setting). */
function wishId(wanted: boolean, o: WishOptions): string {
  // A priority joins the id only when given: the ids kept before priorities existed stay the same.
  return JSON.stringify([wanted, o.force === true, o.restart === true, o.energyLimit === undefined ? 'node' : o.energyLimit, ...(o.priority !== undefined ? [o.priority] : [])]);
}

/**
 * A wish from the flow. Returns false when it changes nothing: the same wish
 * again (an MQTT publisher repeating its value) sends nothing in any state,
 * failed and busy included. With onDelay/offDelay a change is held until it has
 * lasted the delay (ripen); a flip back within it cancels it.
 */
export function applyWish(m: ControlMemory, wanted: boolean, opts: WishOptions, now: number, s: ControlSettings): boolean {
  const id = wishId(wanted, opts);
  // msg.force and msg.restart are presses of a button, not a state: pressed again (a new session, a new failure) they act again.
  if (id === m.lastWish && opts.force !== true && opts.restart !== true) return false;
  m.lastWish = id;
  // msg.force is the dashboard's STOP button: the delays are for a flapping input, not for it.
  const delay = wanted ? s.onDelayMs : opts.force === true ? 0 : s.offDelayMs;
  if (delay > 0 && m.wanted !== wanted) {
    if (m.held?.wanted !== wanted) m.held = { wanted, since: now, force: opts.force === true, restart: opts.restart === true, ...(opts.energyLimit !== undefined ? { energyLimit: opts.energyLimit } : {}), ...(opts.priority !== undefined ? { priority: opts.priority } : {}) };
    return true;
  }
  // A held wish cancelled by a flip back is a change: written down (a redeploy must not bring it back) and shown.
  const cancelled = m.held !== null;
  m.held = null;
  return takeWish(m, wanted, opts, now, s) || cancelled;
}

/** A held wish that has lasted its delay takes effect (called at every decision). */
export function ripen(m: ControlMemory, now: number, s: ControlSettings): void {
  const h = m.held;
  if (!h || now - h.since < (h.wanted ? s.onDelayMs : s.offDelayMs)) return;
  m.held = null;
  takeWish(m, h.wanted, { force: h.force, restart: h.restart, ...(h.energyLimit !== undefined ? { energyLimit: h.energyLimit } : {}), ...(h.priority !== undefined ? { priority: h.priority } : {}) }, now, s);
}

function takeWish(m: ControlMemory, wanted: boolean, opts: WishOptions, now: number, s: ControlSettings): boolean {
  const limit = wanted ? (opts.energyLimit === undefined ? s.energyLimitKWh : opts.energyLimit) : m.limitKWh;
  const newLimit = limit !== m.limitKWh;
  m.limitKWh = limit;
  if (m.wanted !== wanted) {
    m.wanted = wanted;
    newRound(m);
    m.offPending = !wanted;
    m.force = !wanted && opts.force === true;
    m.busy = false;
    m.done = null;
    m.wishKWh = 0;
    m.priority = wanted ? opts.priority ?? null : null;
    // A new on after an off: the driver's end no longer holds it back.
    if (wanted) m.endedAtStation = false;
    return true;
  }
  if (wanted) {
    const newPriority = opts.priority !== undefined && opts.priority !== m.priority;
    if (newPriority) m.priority = opts.priority as number;
    if (newLimit && m.done) {
      m.done = null;
      return true;
    }
    // msg.restart: a new round, only where something holds the START back (the bound on STARTs too: the press is then answered with when the next START goes).
    const bound = m.command === null && startFreeIn(m, now, s) > 0;
    if (!opts.restart || !(m.failed?.action === 'START' || m.endedAtStation || m.done || bound)) return newLimit || newPriority;
    m.endedAtStation = false;
    m.done = null;
    m.wishKWh = 0;
    newRound(m);
    return true;
  }
  // off again with msg.force: stop what is there now, without waiting for the guard.
  if (opts.force === true && !(m.force && m.offPending)) {
    m.force = true;
    m.offPending = true;
    return true;
  }
  return false;
}

/** What progress shows, taken into memory: commands confirmed or given up, the end of a session seen. */
export function observe(m: ControlMemory, view: ProgressView, now: number, s: ControlSettings): void {
  const cmd = m.command;
  if (view.kind === 'unreadable') return;
  if (view.kind === 'active') {
    if (m.seenTx !== view.transactionId) m.seenKWh = null;
    if (view.energyKWh !== undefined) m.seenKWh = view.energyKWh;
    if (m.yielding && m.yielding.transactionId !== view.transactionId) m.yielding = null;
    if (cmd?.action === 'START') m.command = null;
    else if (cmd?.action === 'STOP' && cmd.transactionId !== view.transactionId) {
      // The session we stopped ended; this one is another.
      m.command = null;
      m.offPending = false;
    } else if (cmd?.action === 'STOP' && now - cmd.at >= s.waitMs) m.command = null; // that STOP did not stop it
    if (m.wanted && (m.round === 'START' || m.failed?.action === 'START')) newRound(m);
    if (m.wanted) m.endedAtStation = false;
    m.busy = false;
    // A session: the car is plugged in and the connector works; the bound is for STARTs that bring none.
    m.starts = [];
    m.seenTx = view.transactionId;
    return;
  }
  if (view.kind === 'pending') {
    if (cmd?.action === 'STOP') {
      m.command = null;
      m.offPending = false;
    } else if (cmd?.action === 'START' && now - cmd.at >= s.waitMs) {
      // Pending longer than the wait: that attempt failed; the session may still come, and is never STARTed over.
      m.command = null;
      if (m.wanted) m.failed = { action: 'START', reason: `the session stayed pending (no transaction) for more than ${secs(s.waitMs)} after START`, at: now };
    }
    return;
  }
  // No session on this connector.
  if (m.yielding) {
    // Stopped for the depot: its energy counts in the wish's total (the energy limit), and the target queues again.
    m.wishKWh += m.seenKWh ?? 0;
    m.yielding = null;
  }
  if (cmd?.action === 'STOP') {
    m.command = null;
    newRound(m);
    m.offPending = false;
  } else if (m.wanted === true && m.seenTx !== null) {
    m.endedAtStation = true;
  }
  m.seenTx = null;
  m.seenKWh = null;
  if (cmd?.action === 'START' && now - cmd.at >= s.waitMs) m.command = null; // no session within the wait: that attempt is used
  if (m.wanted === false && m.command?.action !== 'START' && !startMayStillBring(m, now, s)) m.offPending = false;
}

/**
 * A START of ours with no session seen since, sent within the START window: a
 * station slow to report may still bring its session after the wait, and an
 * off that came meanwhile must stop it (enforce or not).
 */
function startMayStillBring(m: ControlMemory, now: number, s: ControlSettings): boolean {
  const lastStart = m.starts[m.starts.length - 1];
  return lastStart !== undefined && now - lastStart < startWindowMs(s);
}

/** ms the guard still holds `action` back (0: free). */
export function guardLeft(m: ControlMemory, action: Action, now: number, s: ControlSettings): number {
  if (!m.last || m.last.action === action || s.guardMs <= 0) return 0;
  return Math.max(0, s.guardMs - (now - m.last.at));
}

/** A command about to be sent, taken into memory (written to the store before it goes). */
export function noteSent(m: ControlMemory, action: Action, now: number, transactionId?: string): void {
  if (m.round !== action) {
    m.round = action;
    m.attempts = 0;
  }
  m.attempts++;
  m.command = transactionId ? { action, at: now, transactionId } : { action, at: now };
  m.last = { action, at: now };
  if (action === 'STOP') m.force = false;
  else m.starts = [...m.starts, now].slice(-5);
}

/** ms until the bound on STARTs lets one more go (0: now): at most startAttempts with no session seen since, in any window (startWindowMs). */
export function startFreeIn(m: ControlMemory, now: number, s: ControlSettings): number {
  const w = startWindowMs(s);
  const recent = m.starts.filter((t) => now - t < w);
  if (recent.length < s.startAttempts) return 0;
  return w - (now - recent[recent.length - s.startAttempts]);
}

/** What should be compared with what is: the state, and the command to send if one is due. */
export function decide(m: ControlMemory, view: ProgressView, now: number, s: ControlSettings, mayCommand = true): Decision | null {
  if (view.kind === 'unreadable') return null;
  ripen(m, now, s);
  const d = m.wanted === true ? decideOn(m, view, now, s, mayCommand) : m.wanted === false ? decideOff(m, view, now, s, mayCommand) : { state: actualState(view), reason: 'no wish yet', nextMs: s.checkMs };
  if (!m.held) return d;
  const left = (m.held.wanted ? s.onDelayMs : s.offDelayMs) - (now - m.held.since);
  return { ...d, reason: `${d.reason}; ${m.held.wanted ? 'on' : 'off'} in ${mmss(left)} if it holds (${m.held.wanted ? 'onDelay' : 'offDelay'})`, nextMs: Math.min(d.nextMs, left) };
}

/** The state progress shows, with no wish taken into account. */
export function actualState(view: ProgressView): ControlState {
  return view.kind === 'active' ? 'charging' : view.kind === 'pending' ? 'starting' : 'idle';
}

const waitLeft = (m: ControlMemory, now: number, s: ControlSettings): number => Math.max(0, s.waitMs - (now - (m.command?.at ?? now)));

function decideOn(m: ControlMemory, view: ProgressView, now: number, s: ControlSettings, mayCommand: boolean): Decision {
  if (view.kind === 'active') return decideCharging(m, view, now, s, mayCommand);
  const inWait = m.command?.action === 'START';
  if (view.kind === 'pending') {
    if (inWait) return { state: 'starting', reason: 'START accepted: the session is pending (no transaction yet)', nextMs: Math.min(s.confirmMs, waitLeft(m, now, s)) };
    if (m.failed?.action === 'START') return { state: 'failed', reason: m.failed.reason, nextMs: s.checkMs };
    return { state: 'starting', reason: 'a session is pending (no transaction yet)', nextMs: s.checkMs };
  }
  if (view.kind === 'elsewhere') return { state: 'idle', reason: `the RFID token is in use at ${view.locationId} / ${view.evseId}: not started here`, nextMs: s.checkMs };
  if (m.done) return { state: 'done', reason: m.done.reason, nextMs: s.checkMs };
  if (m.endedAtStation) return { state: 'idle', reason: ENDED_AT_STATION, nextMs: s.checkMs };
  const attempt = { n: m.round === 'START' ? m.attempts : 0, of: s.startAttempts };
  if (m.command?.action === 'START') {
    // A START taken over from another replica is dated ahead (its send may still arrive): no "sent -29 s ago".
    const ago = now - m.command.at;
    const sent = ago >= 0 ? `sent ${secs(ago)} ago` : 'taken over from another replica, whose send may still arrive';
    return { state: 'starting', reason: `START ${attempt.n}/${attempt.of} ${sent}: waiting for the session`, attempt, nextMs: Math.min(s.confirmMs, waitLeft(m, now, s)) };
  }
  if (m.round === 'START' && m.attempts >= s.startAttempts && !m.failed) m.failed = { action: 'START', reason: NO_SESSION_AFTER_START, at: now };
  if (m.failed?.action === 'START') {
    // A timed retry: the car may be plugged in later, the connector may free.
    const left = s.retryMs > 0 ? s.retryMs - (now - m.failed.at) : Infinity;
    const state = m.failed.busy ? 'busy' : 'failed';
    if (left > 0) return { state, reason: left < Infinity ? `${m.failed.reason}; next round in ${mmss(left)}` : m.failed.reason, attempt, nextMs: Math.min(s.checkMs, left), ...(left < Infinity ? { startInMs: left } : {}) };
    newRound(m);
    attempt.n = 0;
  }
  if (!mayCommand) return { state: 'idle', reason: OTHER_SENDER, nextMs: s.checkMs };
  const guard = guardLeft(m, 'START', now, s);
  if (guard > 0) return { state: 'guard', reason: `START in ${mmss(guard)}: guard of ${secs(s.guardMs)} after the last STOP`, guardLeftMs: guard, nextMs: Math.min(guard, s.checkMs) };
  const free = startFreeIn(m, now, s);
  if (free > 0) return { state: 'failed', reason: `no more than ${s.startAttempts} STARTs per ${secs(startWindowMs(s))}: next START in ${mmss(free)}`, nextMs: Math.min(free, s.checkMs), startInMs: free };
  const n = attempt.n + 1;
  return { state: 'starting', reason: `START ${n}/${s.startAttempts} sent`, send: { action: 'START' }, attempt: { n, of: s.startAttempts }, nextMs: Math.min(s.confirmMs, s.waitMs) };
}

/** Charging while wanted on: kept so, unless the energy limit is reached (then stopped: done). */
function decideCharging(m: ControlMemory, view: Extract<ProgressView, { kind: 'active' }>, now: number, s: ControlSettings, mayCommand: boolean): Decision {
  // The wish's total: the sessions a depot stopped for turns count too.
  const energy = view.energyKWh === undefined ? undefined : Math.round((m.wishKWh + view.energyKWh) * 1000) / 1000;
  if (!m.done && m.limitKWh !== null && energy !== undefined && energy >= m.limitKWh) {
    m.done = { reason: `energy limit of ${m.limitKWh} kWh reached (${energy} kWh): stopped; not started again until a new wish`, transactionId: view.transactionId };
  }
  // Only the session that reached the limit is stopped: one the driver starts after it is theirs.
  if (m.done && m.done.transactionId === view.transactionId) {
    const stop = stopActive(m, view.transactionId, now, s, mayCommand);
    return m.done.byDepot ? depotStop(stop, m.done.reason) : stop;
  }
  if (m.yielding?.transactionId === view.transactionId) return depotStop(stopActive(m, view.transactionId, now, s, mayCommand), m.yielding.reason);
  return { state: 'charging', reason: `charging (transaction ${view.transactionId})`, nextMs: s.checkMs };
}

/** The STOP of a limit or of the depot says why (a turn, a shed, a full car) when it goes; the rest of its round as usual. */
function depotStop(d: Decision, why: string): Decision {
  return d.send && d.attempt?.n === 1 ? { ...d, reason: why } : d;
}

function decideOff(m: ControlMemory, view: ProgressView, now: number, s: ControlSettings, mayCommand: boolean): Decision {
  if (view.kind === 'none' || view.kind === 'elsewhere') {
    if (m.command?.action === 'START' && m.offPending) {
      return { state: 'stopping', reason: 'a START sent before the off may still bring a session: it is stopped if one appears', nextMs: Math.min(s.confirmMs, waitLeft(m, now, s)) };
    }
    return { state: 'idle', reason: view.kind === 'none' ? 'no session' : `no session here (the RFID token is in use at ${view.locationId} / ${view.evseId})`, nextMs: s.checkMs };
  }
  const mustStop = m.offPending || s.enforce;
  if (view.kind === 'pending') {
    if (!mustStop) return { state: 'starting', reason: 'a session started at the station is pending: not stopped (enforce is off)', nextMs: s.checkMs };
    const recent = m.command !== null && now - m.command.at < s.waitMs;
    return { state: 'stopping', reason: 'the session is pending (no transaction yet): it is stopped once it has one', nextMs: recent ? s.confirmMs : s.checkMs };
  }
  if (view.kind !== 'active') return { state: actualState(view), reason: 'progress could not be read', nextMs: s.checkMs };
  if (!mustStop) return { state: 'charging', reason: 'started at the station: not stopped (enforce is off)', nextMs: s.checkMs };
  return stopActive(m, view.transactionId, now, s, mayCommand);
}

function stopActive(m: ControlMemory, transactionId: string, now: number, s: ControlSettings, mayCommand: boolean): Decision {
  if (m.failed?.action === 'STOP') {
    const left = s.checkMs - (now - m.failed.at);
    if (left > 0) return { state: 'failed', reason: m.failed.reason, nextMs: left };
    newRound(m); // STOP is never given up while wanted off: a new round
  }
  const attempt = { n: m.round === 'STOP' ? m.attempts : 0, of: s.stopAttempts };
  const cmd = m.command;
  if (cmd?.action === 'STOP' && cmd.transactionId === transactionId) {
    return { state: 'stopping', reason: `STOP ${attempt.n}/${attempt.of} sent ${secs(now - cmd.at)} ago: waiting for the session to end`, attempt, nextMs: Math.min(s.confirmMs, waitLeft(m, now, s)) };
  }
  if (m.round === 'STOP' && m.attempts >= s.stopAttempts) {
    const reason = `still charging after ${m.attempts} STOPs (transaction ${transactionId}): the station does not stop; STOP again in ${secs(s.checkMs)}`;
    m.failed = { action: 'STOP', reason, at: now };
    return { state: 'failed', reason, attempt, nextMs: s.checkMs, error: new ChargingError('NOT_STOPPED', `The session did not end after ${m.attempts} STOPs (each followed by a wait of ${secs(s.waitMs)}): transaction ${transactionId} is still active; STOP again in ${secs(s.checkMs)}`) };
  }
  if (!mayCommand) return { state: 'charging', reason: OTHER_SENDER, nextMs: s.checkMs };
  // The energy limit is no change of mind: its STOP does not wait for the guard either.
  const guard = m.force || m.done || m.yielding ? 0 : guardLeft(m, 'STOP', now, s);
  if (guard > 0) return { state: 'guard', reason: `STOP in ${mmss(guard)}: guard of ${secs(s.guardMs)} after the last START (msg.force stops at once)`, guardLeftMs: guard, nextMs: Math.min(guard, s.checkMs) };
  const n = attempt.n + 1;
  return { state: 'stopping', reason: `STOP ${n}/${s.stopAttempts} sent`, send: { action: 'STOP', transactionId }, attempt: { n, of: s.stopAttempts }, nextMs: s.confirmMs };
}
