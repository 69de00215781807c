/** Waiting until progress confirms a START or a STOP (the "wait until started / ended" option). */
import { ChargingError } from '../errors';
import { hasTransaction, ProgressRecord, transactionIdOf } from './record';
import { monotonicNow } from '../clock';

/**
 * One progress query; `signal` fires when the query must give up (what is left of the wait has run out, or the node
 * closed); `mayProceed` is asked right before each attempt goes on the wire (false: nothing is sent, it fails).
 */
export type PollFn = (token: string, signal?: AbortSignal, mayProceed?: () => boolean) => Promise<ProgressRecord | null>;

export interface WaitOptions {
  timeoutMs: number;
  intervalMs: number;
  signal?: AbortSignal;
  now?: () => number;
}

/** The least time one poll is given, even when the wait has (almost) run out: the last poll still gets a chance. */
export const MIN_POLL_MS = 500;

/** What a confirmed START looks like: the session has a transactionId. */
export const started = hasTransaction;

/** What a confirmed STOP of `transactionId` looks like: no session, or another transaction on that token. */
export function ended(transactionId: string): (record: ProgressRecord | null) => boolean {
  return (record) => record === null || transactionIdOf(record) !== transactionId;
}

/**
 * Polls until want(record) holds (record null = no session). Resolves with the
 * last record; rejects with NOT_CONFIRMED when the time runs out. Poll errors
 * other than CLOSED do not end the wait early: the next poll may work.
 */
/**
 * Runs one poll cut at `ms` (a Node timer: monotonic) or when `outer` fires.
 * A poll cut by its own deadline is "no answer in time", not CLOSED: only the
 * outer signal means the node closed.
 */
async function boundedPoll(poll: PollFn, token: string, ms: number, outer?: AbortSignal): Promise<ProgressRecord | null> {
  const cut = new AbortController();
  const timer = setTimeout(() => cut.abort(), Math.max(0, ms));
  const onOuter = () => cut.abort();
  outer?.addEventListener('abort', onOuter, { once: true });
  if (outer?.aborted) cut.abort();
  try {
    return await poll(token, cut.signal);
  } catch (err) {
    if (cut.signal.aborted && !outer?.aborted) throw new ChargingError('TIMEOUT', `no answer within the ${Math.round(ms / 100) / 10} s left of the wait`);
    throw err;
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
  }
}

export async function waitForSession(
  poll: PollFn,
  token: string,
  want: (record: ProgressRecord | null) => boolean,
  what: string,
  opts: WaitOptions,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
): Promise<ProgressRecord | null> {
  const now = opts.now ?? monotonicNow;
  const deadline = now() + opts.timeoutMs;
  let lastError: ChargingError | null = null;
  for (;;) {
    try {
      // Each poll gets only what is left of the wait (at least a moment), so the answer comes within the wait plus that moment.
      const record = await boundedPoll(poll, token, Math.max(deadline - now(), MIN_POLL_MS), opts.signal);
      if (want(record)) return record;
      lastError = null;
    } catch (err) {
      if (err instanceof ChargingError && err.code === 'CLOSED') throw err;
      lastError = err instanceof ChargingError ? err : new ChargingError('NETWORK', String(err));
    }
    const left = deadline - now();
    if (left <= 0) {
      const why = lastError ? ` (last poll: ${lastError.message})` : '';
      throw new ChargingError('NOT_CONFIRMED', `${what} was not confirmed within ${Math.round(opts.timeoutMs / 1000)} s: the command was accepted, but progress did not show it yet${why}`);
    }
    await sleep(Math.min(opts.intervalMs, left), opts.signal);
  }
}
