/**
 * At most `limit` holders at once; the rest wait in arrival order. A burst of a
 * thousand messages thus opens at most `limit` sockets and is served fairly.
 * A free slot is taken synchronously (no promise on the common path); a queued
 * place is a Wait that its deadline or its caller's abort can end.
 */
import { closedError } from '../errors';
import type { Wait } from './deadlines';

export type Release = () => void;

export class ConcurrencyLimiter {
  private active = 0;
  /** insertion-ordered: the first entry is served first; deleting a cancelled one is O(1) */
  private readonly queue = new Set<Wait<Release>>();
  private closed = false;

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  }

  /** A slot now, or null when all are taken. */
  tryAcquire(): Release | null {
    if (this.closed || this.active >= this.limit) return null;
    this.active++;
    return this.releaser();
  }

  /** Queue for the next free slot; the wait resolves with its release. */
  enqueue(wait: Wait<Release>): void {
    if (this.closed) return wait.reject(closedError('configuration'));
    this.queue.add(wait);
  }

  /** Leave the queue (the wait expired or was cancelled). */
  forget(wait: Wait<Release>): void {
    this.queue.delete(wait);
  }

  /** Rejects everyone still waiting; holders finish and release as usual. */
  close(): void {
    this.closed = true;
    const waiting = [...this.queue];
    this.queue.clear();
    for (const w of waiting) w.reject(closedError('configuration'));
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const next of this.queue) {
        this.queue.delete(next);
        if (next.settled) continue;
        next.resolve(this.releaser()); // the slot passes on; active stays the same
        return;
      }
      this.active--;
    };
  }
}
