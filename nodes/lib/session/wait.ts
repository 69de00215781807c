/** Waiting until progress confirms a START or a STOP (the "wait until started / ended" option). */
import { ChargingError } from '../errors';
import { hasTransaction, ProgressRecord, transactionIdOf } from './record';
import { monotonicNow } from '../clock';

export type PollFn = (token: string) => Promise<ProgressRecord | null>;

export interface WaitOptions {
  timeoutMs: number;
  intervalMs: number;
  signal?: AbortSignal;
  now?: () => number;
}

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
      const record = await poll(token);
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
