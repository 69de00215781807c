import { ChargingError } from './errors';

type Waiter = { resolve: (release: () => void) => void; reject: (err: Error) => void; signal?: AbortSignal; onAbort?: () => void };

/**
 * At most `limit` holders at once; the rest wait in arrival order. A burst of a
 * thousand messages thus opens at most `limit` sockets and is served fairly.
 */
export class ConcurrencyLimiter {
  private active = 0;
  private readonly queue: Waiter[] = [];
  private closed = false;

  constructor(private limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  }

  get inFlight(): number {
    return this.active;
  }

  acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.closed) return Promise.reject(closedError());
    if (signal?.aborted) return Promise.reject(abortError());
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.queue.indexOf(waiter);
          if (i >= 0) this.queue.splice(i, 1);
          reject(abortError());
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.queue.push(waiter);
    });
  }

  /** Rejects everyone still waiting; holders finish and release as usual. */
  close(): void {
    this.closed = true;
    for (const w of this.queue.splice(0)) {
      if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
      w.reject(closedError());
    }
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) {
        if (next.signal && next.onAbort) next.signal.removeEventListener('abort', next.onAbort);
        next.resolve(this.releaser());
      } else {
        this.active--;
      }
    };
  }
}

function closedError(): ChargingError {
  return new ChargingError('CLOSED', 'The service configuration was closed (redeploy or shutdown) before the request was sent');
}

export function abortError(): ChargingError {
  return new ChargingError('CLOSED', 'The node was closed (redeploy or shutdown) before the request was sent');
}

/** setTimeout as a promise that an AbortSignal cancels (the timer is cleared). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError());
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
