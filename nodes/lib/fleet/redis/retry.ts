/**
 * The one way the fleet waits and tries again: pauses that double from a
 * first one up to a cap, each with jitter (half of it fixed, half random), so
 * that replicas that failed together (a reconnect, a write pause) do not come
 * back in step. Two schedules: a write whose reply may be lost is tried again
 * (RETRY), a value another replica is about to write is looked at again (LOOK).
 */
import { ChargingError } from '../../errors';

export interface Schedule {
  firstMs: number;
  maxMs: number;
}

/** a write whose answer did not come: tried again under the same id */
export const RETRY: Schedule = { firstMs: 50, maxMs: 400 };
/** a value another replica is about to write (an outcome, a token): looked at again */
export const LOOK: Schedule = { firstMs: 25, maxMs: 200 };

export class Backoff {
  private nextMs: number;

  constructor(
    private readonly schedule: Schedule,
    private readonly random: () => number = Math.random,
  ) {
    this.nextMs = schedule.firstMs;
  }

  /** The next pause: between half and all of the current step; the step doubles up to the cap. */
  next(): number {
    const step = this.nextMs;
    this.nextMs = Math.min(this.schedule.maxMs, step * 2);
    return step / 2 + (this.random() * step) / 2;
  }
}

/**
 * How long a write a user asked for (a list change, a message for a holder)
 * is tried while Redis does not take it (a failover, a reconnect, a write
 * pause), as a claim is read back: after that its caller gets the error.
 */
export const RIDE_THROUGH_MS = 10_000;

/** A Redis failure worth trying again: not a closed connection or a configuration that cannot work. */
export const transient = (err: unknown): boolean => !(err instanceof ChargingError && (err.code === 'CLOSED' || err.code === 'CONFIG'));

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/**
 * Runs `attempt` until it resolves, `stop(err)` says a failure is final, or
 * the deadline (monotonic ms, `now`) passes: then the last failure is thrown.
 */
export async function retryUntil<T>(attempt: () => Promise<T>, opts: { deadline: number; now: () => number; schedule?: Schedule; stop?: (err: unknown) => boolean }): Promise<T> {
  const backoff = new Backoff(opts.schedule ?? RETRY);
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      const left = opts.deadline - opts.now();
      if (left <= 0 || opts.stop?.(err)) throw err;
      await sleep(Math.min(backoff.next(), left));
    }
  }
}
