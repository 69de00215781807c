/**
 * "Make sure it ends" (issue 17.1): STOP, watch the session end as "wait until
 * ended" does, and send the same STOP again while it is still active, up to
 * `attempts` STOPs in all. STOP may be repeated (a second STOP of an ended
 * transaction changes nothing); START never is, so nothing here starts one.
 */
import { ChargingError, closedError, isChargingError } from '../errors';
import { ChargingCommand } from './commands';
import { ProgressRecord, transactionIdOf } from './record';
import { ended, PollFn, waitForSession } from './wait';

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
  outcome: 'ended' | 'not stopped';
  /** STOPs sent (including ones whose outcome was unknown) */
  stopAttempts: number;
  /** the last progress record seen: null when there is no session, undefined when none was read */
  record: ProgressRecord | null | undefined;
  /** the last record that showed the session active (for msg.session), if one was seen */
  lastActive: ProgressRecord | undefined;
  /** the answer of the last accepted STOP, when one was accepted */
  accepted: R | undefined;
  /** one line for NOT_STOPPED */
  message?: string;
}

/** A STOP whose effect only progress can tell: its answer was lost, or the service knows no such session (404) or says it is already stopping (409). */
function askProgress(err: unknown): boolean {
  return isChargingError(err) && (err.code === 'OUTCOME_UNKNOWN' || err.code === 'NO_SESSION' || err.statusCode === 404 || err.statusCode === 409);
}

function describe(record: ProgressRecord | null | undefined): string {
  if (record === undefined) return 'progress could not be read';
  if (record === null) return 'no session';
  return `the session was still active (transaction ${transactionIdOf(record) ?? 'unknown'})`;
}

export async function ensureStop<R>(cmd: ChargingCommand, opts: EnsureStopOptions<R>): Promise<EnsureStopResult<R>> {
  const want = ended(cmd.transactionId as string);
  let record: ProgressRecord | null | undefined;
  let lastActive: ProgressRecord | undefined;
  let accepted: R | undefined;
  // Keeps what progress last showed, for the result and the NOT_STOPPED line.
  const poll: PollFn = async (token, signal) => {
    record = await opts.poll(token, signal);
    if (record !== null && !want(record)) lastActive = record;
    return record;
  };
  let sent = 0;
  while (sent < opts.attempts) {
    if (opts.signal?.aborted) throw closedError('node');
    sent++;
    opts.onAttempt?.(sent, opts.attempts);
    try {
      accepted = await opts.send(cmd);
    } catch (err) {
      if (!askProgress(err)) throw err;
    }
    if (opts.signal?.aborted) throw closedError('node');
    opts.onWaiting?.(sent, opts.attempts);
    try {
      const last = await waitForSession(poll, cmd.token, want, 'STOP', { timeoutMs: opts.timeoutMs, intervalMs: opts.intervalMs, signal: opts.signal, now: opts.now }, opts.sleep);
      return { outcome: 'ended', stopAttempts: sent, record: last, lastActive, accepted };
    } catch (err) {
      // Whatever the sleep threw on close, the caller reads CLOSED.
      if (opts.signal?.aborted) throw closedError('node');
      if (!isChargingError(err) || err.code !== 'NOT_CONFIRMED') throw err;
    }
  }
  const s = sent === 1 ? '' : 's';
  const message = `The session did not end after ${sent} STOP${s} (each followed by a wait of ${Math.round(opts.timeoutMs / 1000)} s): ${describe(record)}`;
  return { outcome: 'not stopped', stopAttempts: sent, record, lastActive, accepted, message };
}

/** The NOT_STOPPED error for a result that did not end. */
export function notStopped(result: EnsureStopResult<unknown>): ChargingError {
  return new ChargingError('NOT_STOPPED', result.message ?? `The session did not end after ${result.stopAttempts} STOPs`);
}
