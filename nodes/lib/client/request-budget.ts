/**
 * Max requests per second of one configuration, shared by every
 * node on it: START, STOP, queries, waits and watch polls (token requests are
 * not counted: there is one per token lifetime). Operators throttle or suspend
 * API keys that poll too much; Max in flight bounds concurrency, not rate.
 *
 * Starts are spaced evenly, 1/rate apart, so any 1 s window holds at most
 * rate + 1 of them. The place is taken as the request goes on the wire (after
 * its connection slot: see admission.ts), so what stalled before cannot bunch up.
 * Commands and queries go before watch polls. A 429 halves the rate used, once
 * per throttling episode; good answers climb it back to the limit, a tenth of
 * it at a time. With no limit set the client holds no budget at all.
 * Watch nodes tell the budget how many polls per second they would like
 * (setPollDemand) and stretch their schedule by pollStretch(), so that polls
 * never queue without end. All on the monotonic clock.
 *
 * A start taken synchronously (tryTake) costs no promise; a queued place is a
 * Wait that its deadline or its caller's abort can end, as in ConcurrencyLimiter.
 */
import { closedError } from '../errors';
import { monotonicNow } from '../clock';
import type { Wait } from './deadlines';

export type BudgetPriority = 'command' | 'poll';

/**
 * The lowest rate a 429 brings the budget to: one request every 5 s, so that a
 * START or STOP queued behind others still goes out well inside its 30 s.
 */
export const MIN_RATE = 0.2;

/** How long after the rate was lowered a 429 still belongs to the same throttling episode: services count requests per second. */
export const EPISODE_MS = 1000;

/** Share of the rate that watch polls may plan on: the rest stays free for commands and queries. */
export const POLL_SHARE = 0.8;

export class RequestBudget {
  private rate: number;
  /** monotonic ms at which the next start is allowed */
  private nextAt = -Infinity;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly queues: Record<BudgetPriority, Set<Wait<void>>> = { command: new Set(), poll: new Set() };
  /** queued waiters that may be let go without a place when their turn comes (their fence says no: nothing will be sent) */
  private readonly droppable = new Map<Wait<void>, () => boolean>();
  private readonly demand = new Map<string, number>();
  private demandTotal = 0;
  /** monotonic ms at which a 429 last lowered the rate */
  private loweredAt = -Infinity;
  /** a lower limit for a while: this replica's share of the fleet's limit while Redis is away (see setCeiling) */
  private ceiling = Infinity;

  /** limit: requests per second; 0 or not a positive number: no limit */
  constructor(
    readonly limit: number,
    private readonly now: () => number = monotonicNow,
  ) {
    this.rate = limit > 0 && Number.isFinite(limit) ? limit : 0;
  }

  get enabled(): boolean {
    return this.rate > 0;
  }

  /** requests per second in use now (below the limit after a 429) */
  get currentRate(): number {
    return this.rate;
  }

  /** Starts now if allowed and nobody of the same or a higher priority waits; false otherwise. */
  tryTake(priority: BudgetPriority): boolean {
    if (!this.enabled) return true;
    if (this.closed || this.queues.command.size > 0 || (priority === 'poll' && this.queues.poll.size > 0)) return false;
    const now = this.now();
    if (now < this.nextAt) return false;
    this.nextAt = Math.max(this.nextAt, now) + this.spacing();
    return true;
  }

  /**
   * Queues a waiter for its place. `dropNow`, asked when its turn comes: true
   * lets it go without taking a place (the request will not be sent: a lease
   * lost while it waited), so the waiters behind it are not held up by it.
   */
  enqueue(wait: Wait<void>, priority: BudgetPriority, dropNow?: () => boolean): void {
    if (this.closed) return wait.reject(closedError('configuration'));
    this.queues[priority].add(wait);
    if (dropNow) this.droppable.set(wait, dropNow);
    this.pump();
  }

  forget(wait: Wait<void>): void {
    this.queues.command.delete(wait);
    this.queues.poll.delete(wait);
    this.droppable.delete(wait);
  }

  /**
   * The service answered 429 to a request sent at `sentAt` (monotonic ms): use
   * half the rate, once per throttling episode. The answers to requests sent
   * before the rate was last lowered, or within EPISODE_MS after, belong to the
   * episode that lowered it (8 429s in a row halved the rate 8 times: 10/s
   * became 0.039/s, and a queued START waited 25 s); throttling that goes on
   * past it halves the rate again. Never below MIN_RATE (or the limit, if lower).
   */
  onThrottled(sentAt: number): void {
    if (!this.enabled || sentAt < this.loweredAt + EPISODE_MS) return;
    this.loweredAt = this.now();
    this.rate = Math.max(this.rate / 2, Math.min(this.top(), MIN_RATE));
  }

  /** A good answer: climb back towards the limit. */
  onGood(): void {
    const top = this.top();
    if (this.enabled && this.rate < top) this.rate = Math.min(top, this.rate + this.limit / 10);
  }

  /**
   * Coordinate replicas: while the fleet's budget in Redis cannot be asked,
   * this replica keeps to its share of the limit (perSec: the limit divided
   * by the replicas last seen alive); null lifts it when Redis answers again.
   */
  setCeiling(perSec: number | null): void {
    if (!(this.limit > 0)) return;
    this.ceiling = perSec !== null && perSec > 0 ? perSec : Infinity;
    if (this.rate > this.top()) this.rate = this.top();
  }

  /** The highest rate allowed now: the limit, or the ceiling below it. */
  private top(): number {
    return Math.min(this.limit, this.ceiling);
  }

  /** How many polls per second a watch node would like (0 or less: none). */
  setPollDemand(id: string, perSec: number): void {
    this.demandTotal -= this.demand.get(id) ?? 0;
    if (perSec > 0) {
      this.demand.set(id, perSec);
      this.demandTotal += perSec;
    } else this.demand.delete(id);
  }

  /** By how much watch schedules stretch so that their polls fit the budget (1: not at all). */
  pollStretch(): number {
    if (!this.enabled || this.demandTotal <= 0) return 1;
    return Math.max(1, this.demandTotal / (this.rate * POLL_SHARE));
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const q of [this.queues.command, this.queues.poll]) {
      const waiting = [...q];
      q.clear();
      for (const w of waiting) w.reject(closedError('configuration'));
    }
  }

  private spacing(): number {
    return 1000 / this.rate;
  }

  /** Lets the first waiter go when its time has come, and arms the timer for the next one. */
  private pump(): void {
    if (this.timer || this.closed) return;
    for (;;) {
      const next = this.first();
      if (!next) return;
      const dropNow = this.droppable.get(next);
      if (dropNow?.()) {
        this.forget(next);
        next.resolve();
        continue;
      }
      const wait = this.nextAt - this.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, wait);
        this.timer.unref?.();
        return;
      }
      this.forget(next);
      this.nextAt = Math.max(this.nextAt, this.now()) + this.spacing();
      next.resolve();
    }
  }

  private first(): Wait<void> | undefined {
    for (const q of [this.queues.command, this.queues.poll]) {
      for (const w of q) {
        if (!w.settled) return w;
        q.delete(w);
      }
    }
    return undefined;
  }
}
