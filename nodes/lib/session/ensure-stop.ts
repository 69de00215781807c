/**
 * "Make sure it ends": STOP, watch the session end as "wait until
 * ended" does, and send the same STOP again while it is still active, up to
 * `attempts` STOPs in all. STOP may be repeated (a second STOP of an ended
 * transaction changes nothing); START never is, so nothing here starts one.
 */
import { ChargingError, closedError, isChargingError } from '../errors';
import { ChargingCommand } from './commands';
import { ProgressRecord, transactionIdOf } from './record';
import { ended, PollFn, waitForSession } from './wait';
import { monotonicNow } from '../clock';

export interface EnsureStopOptions<R> {
  /** STOPs in all, 1–10 */
  attempts: number;
  /** how long each wait for the end lasts */
  timeoutMs: number;
  intervalMs: number;
  /** the node's close: ends the loop at once, no STOP after it */
  signal?: AbortSignal;
  /** sends one STOP; resolves when it was accepted */
  send: (cmd: ChargingCommand) => Promise<R>;
  poll: PollFn;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** before each STOP: n of attempts */
  onAttempt?: (n: number, of: number) => void;
  /** after each STOP, while its end is awaited */
  onWaiting?: (n: number, of: number) => void;
  now?: () => number;
}

export interface EnsureStopResult<R> {
  /**
   * ended: progress showed no session, or another transaction. not stopped:
   * the last progress read after the last STOP showed it still active. not
   * confirmed: a STOP was accepted, but progress could not be read after it,
   * so nothing says whether it ended (never "still active" then: that would
   * claim a reading nobody made).
   */
  outcome: 'ended' | 'not stopped' | 'not confirmed';
  /** STOPs sent (including ones whose outcome was unknown) */
  stopAttempts: number;
  /** the last progress record seen: null when there is no session, undefined when none was read */
  record: ProgressRecord | null | undefined;
  /** the last record that showed the session active (for msg.session), if one was seen */
  lastActive: ProgressRecord | undefined;
  /** the answer of the last accepted STOP, when one was accepted */
  accepted: R | undefined;
  /** one line for NOT_STOPPED or NOT_CONFIRMED */
  message?: string;
}

/** A STOP whose effect only progress can tell: its answer was lost, or the service knows no such session (404) or says it is already stopping (409). */
function askProgress(err: unknown): boolean {
  return isChargingError(err) && (err.code === 'OUTCOME_UNKNOWN' || err.code === 'NO_SESSION' || err.statusCode === 404 || err.statusCode === 409);
}

/** What progress showed after a STOP: the last read that worked, and whether the poll after it failed. */
interface AfterStop {
  /** monotonic ms at which the STOP was answered */
  stopAt: number;
  /** the last record read after the STOP (null: no session); undefined: none read */
  record: ProgressRecord | null | undefined;
  /** when it was read: wall ms (people read it) and monotonic ms */
  readAtWall: number;
  readAt: number;
  /** the poll after the last read failed (or every poll failed): its error */
  failed: ChargingError | null;
  reads: number;
}

const clockTime = (wallMs: number): string => `${new Date(wallMs).toISOString().slice(11, 19)} UTC`;
const seconds = (ms: number): string => `${Math.round(ms / 100) / 10} s`;

/** "the session active (transaction X) at 10:00:05 UTC, 2.1 s after the STOP": what progress last showed since the STOP, and when. */
function lastSeen(after: AfterStop): string {
  const r = after.record;
  if (r === undefined) return 'nothing since the STOP';
  const what = r === null ? 'no session' : `the session active (transaction ${transactionIdOf(r) ?? 'unknown'})`;
  return `${what} at ${clockTime(after.readAtWall)}, ${seconds(after.readAt - after.stopAt)} after the STOP`;
}

export async function ensureStop<R>(cmd: ChargingCommand, opts: EnsureStopOptions<R>): Promise<EnsureStopResult<R>> {
  const want = ended(cmd.transactionId as string);
  const now = opts.now ?? monotonicNow;
  let lastActive: ProgressRecord | undefined;
  let accepted: R | undefined;
  let after: AfterStop = { stopAt: now(), record: undefined, readAtWall: 0, readAt: 0, failed: null, reads: 0 };
  // Keeps what progress showed since the last STOP: the evidence for the next one, and for the result.
  const poll: PollFn = async (token, signal) => {
    try {
      const record = await opts.poll(token, signal);
      after = { ...after, record, readAtWall: Date.now(), readAt: now(), failed: null, reads: after.reads + 1 };
      if (record !== null && !want(record)) lastActive = record;
      return record;
    } catch (err) {
      after.failed = isChargingError(err) ? err : new ChargingError('NETWORK', String((err as Error)?.message ?? err));
      throw err;
    }
  };
  let sent = 0;
  for (;;) {
    if (opts.signal?.aborted) throw closedError('node');
    sent++;
    opts.onAttempt?.(sent, opts.attempts);
    let refused: ChargingError | null = null;
    try {
      accepted = await opts.send(cmd);
    } catch (err) {
      if (!askProgress(err)) throw err;
      refused = err as ChargingError;
    }
    after = { stopAt: now(), record: undefined, readAtWall: 0, readAt: 0, failed: null, reads: 0 };
    if (opts.signal?.aborted) throw closedError('node');
    opts.onWaiting?.(sent, opts.attempts);
    try {
      const last = await waitForSession(poll, cmd.token, want, 'STOP', { timeoutMs: opts.timeoutMs, intervalMs: opts.intervalMs, signal: opts.signal, now }, opts.sleep);
      return { outcome: 'ended', stopAttempts: sent, record: last, lastActive, accepted };
    } catch (err) {
      // Whatever the sleep threw on close, the caller reads CLOSED.
      if (opts.signal?.aborted) throw closedError('node');
      if (!isChargingError(err) || err.code !== 'NOT_CONFIRMED') throw err;
    }
    // The wait ran out. Only a read that worked, the last of the wait, showing the session active is evidence that it goes on.
    if (after.failed !== null || after.record === undefined) return unconfirmed(after, sent, lastActive, accepted, refused, opts.timeoutMs);
    if (sent >= opts.attempts) break;
  }
  const s = sent === 1 ? '' : 's';
  const active = `transaction ${transactionIdOf(after.record as ProgressRecord) ?? 'unknown'}`;
  const when = `${clockTime(after.readAtWall)}, ${seconds(after.readAt - after.stopAt)} after the last STOP`;
  const message = `The session did not end after ${sent} STOP${s} (each followed by a wait of ${Math.round(opts.timeoutMs / 1000)} s): progress still showed it active (${active}) at ${when}`;
  return { outcome: 'not stopped', stopAttempts: sent, record: after.record, lastActive, accepted, message };
}

/**
 * Progress could not be read after the last STOP: nothing says the session
 * goes on, so no STOP is sent again, and nothing says it ended. A STOP was
 * accepted: "not confirmed". None was (every answer lost, or refused): the
 * STOP's own error stands, with what progress did not tell.
 */
function unconfirmed<R>(after: AfterStop, sent: number, lastActive: ProgressRecord | undefined, accepted: R | undefined, refused: ChargingError | null, timeoutMs: number): EnsureStopResult<R> {
  const why = after.failed ? ` (last query: ${after.failed.message})` : '';
  const read = `progress could not be read after the STOP for ${Math.round(timeoutMs / 1000)} s${why}; last seen: ${lastSeen(after)}`;
  if (accepted === undefined && refused) throw refused.withMessage(`${refused.message}; ${read}`);
  const message = `STOP${sent > 1 ? ` ${sent}` : ''} was accepted, but whether the session ended is not confirmed: ${read}. It was not sent again without evidence that the session goes on`;
  return { outcome: 'not confirmed', stopAttempts: sent, record: after.record, lastActive, accepted, message };
}

/** The error for a result that did not end: NOT_STOPPED (progress showed it active) or NOT_CONFIRMED (progress could not be read). */
export function notStopped(result: EnsureStopResult<unknown>): ChargingError {
  if (result.outcome === 'not confirmed') return new ChargingError('NOT_CONFIRMED', result.message ?? 'The STOP was accepted, but progress could not be read after it');
  return new ChargingError('NOT_STOPPED', result.message ?? `The session did not end after ${result.stopAttempts} STOPs`);
}
