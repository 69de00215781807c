/**
 * At most `limit` holders at once; the rest wait in arrival order, commands and
 * queries before watch polls (a slot is taken before the request budget's place,
 * so a START must not queue behind polls that wait for their place). A burst of a
 * thousand messages thus opens at most `limit` sockets and is served fairly.
 * A free slot is taken synchronously (no promise on the common path); a queued
 * place is a Wait that its deadline or its caller's abort can end.
 */
import { closedError } from '../errors';
import type { Wait } from './deadlines';
import type { BudgetPriority } from './request-budget';

export type Release = () => void;

export class ConcurrencyLimiter {
  private active = 0;
  /** insertion-ordered: the first entry is served first; deleting a cancelled one is O(1) */
  private readonly queues: Record<BudgetPriority, Set<Wait<Release>>> = { command: new Set(), poll: new Set() };
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
  enqueue(wait: Wait<Release>, priority: BudgetPriority = 'command'): void {
    if (this.closed) return wait.reject(closedError('configuration'));
    this.queues[priority].add(wait);
  }

  /** Leave the queue (the wait expired or was cancelled). */
  forget(wait: Wait<Release>): void {
    this.queues.command.delete(wait);
    this.queues.poll.delete(wait);
  }

  /** Rejects everyone still waiting; holders finish and release as usual. */
  close(): void {
    this.closed = true;
    const waiting = [...this.queues.command, ...this.queues.poll];
    this.queues.command.clear();
    this.queues.poll.clear();
    for (const w of waiting) w.reject(closedError('configuration'));
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const queue of [this.queues.command, this.queues.poll]) {
        for (const next of queue) {
          queue.delete(next);
          if (next.settled) continue;
          next.resolve(this.releaser()); // the slot passes on; active stays the same
          return;
        }
      }
      this.active--;
    };
  }
}
