/**
 * When each watched token is polled: one timer for all of them, a round-robin
 * order, the polls of a round spread evenly over the interval and the interval
 * stretched to fit the request budget. It knows nothing of what a poll does:
 * it hands each token that falls due to `onDue`.
 */

/**
 * Polls a tick takes when they come often: each wake-up of an idle process
 * costs about as much again as the poll it makes (caches gone cold), so four
 * polls per wake-up rather than one (100 tokens at 10 s: a tick every 400 ms,
 * not 100 ms). Measured at 100 tokens (bench/watch-profile.ts, 3 rounds, 30 s
 * settle): our node 2 997 -> 1 650 µs per poll, bare axios on the same
 * schedule 2 524 -> 1 374 (ours/bare about the same: see docs/performance.md).
 * The four go out together every 400 ms, so up to four pooled connections may
 * be open instead of one; Max requests per second spaces them when set.
 */
export const POLLS_PER_TICK = 4;

/**
 * The tick period of a watcher: the interval shared among the tokens, four
 * polls per tick (POLLS_PER_TICK) but never longer than the interval (a tick
 * polls a token at most once, so fewer than four tokens tick once per
 * interval), within [20 ms, maxTickMs]. Exported so that the benchmark's bare
 * polling runs on exactly this schedule.
 */
export function watchTickMs(intervalMs: number, tokens: number, maxTickMs = 1000): number {
  const n = Math.max(1, tokens);
  return Math.min(maxTickMs, Math.max(20, (Math.min(POLLS_PER_TICK, n) * intervalMs) / n));
}

export interface ScheduleOptions {
  intervalMs: number;
  /** longest gap between two ticks */
  maxTickMs?: number;
  /** read at every tick: how much longer than intervalMs a round takes now (default 1) */
  stretch?: () => number;
  /** a monotonic clock */
  now: () => number;
}

/**
 * One timer for all members: every tick hands over the share of members that
 * fall due, in round-robin order, so N members at interval I cost N polls per
 * interval, spread over it a few per tick (watchTickMs), however large N is.
 * The order is a queue: a member is taken from the head, handed over and put
 * back at the tail, so it comes round again after every other member, one
 * interval later. New members wait in a queue of their own that goes first.
 * Adding or removing a member costs O(1) amortised: a removed member is
 * dropped when it reaches the head.
 */
export class PollSchedule<T extends { readonly token: string }> {
  private readonly members = new Map<string, T>();
  /** round-robin order, from `head`; may hold members no longer scheduled (dropped at the head) */
  private queue: T[] = [];
  private head = 0;
  /** added and not handed over yet: before the round-robin queue */
  private fresh: T[] = [];
  private freshHead = 0;
  private budget = 0;
  private timer: NodeJS.Timeout | null = null;
  /** the delay `timer` was armed with: a tick re-arms the same Timeout (refresh) while it stays the same */
  private timerMs = -1;
  private lastTick = 0;
  private closed = false;

  constructor(
    private readonly options: ScheduleOptions,
    /** a member fell due (called during the tick, after it went back to the tail) */
    private readonly onDue: (member: T) => void,
    /** the end of every tick: at least once per maxTickMs while anything is scheduled */
    private readonly afterTick: () => void,
  ) {}

  get size(): number {
    return this.members.size;
  }

  has(token: string): boolean {
    return this.members.has(token);
  }

  /** Whether this very member (not another one of the same token added since) is still scheduled. */
  holds(member: T): boolean {
    return this.members.get(member.token) === member;
  }

  /** Schedules a member not scheduled yet: due from the next tick, rather than a whole interval later. */
  add(member: T): void {
    if (this.closed || this.members.has(member.token)) return;
    this.members.set(member.token, member);
    this.fresh.push(member);
    this.budget = Math.max(this.budget, 1);
    if (this.timer) return;
    this.lastTick = this.options.now();
    this.arm(null, 0);
  }

  /** Unschedules these tokens; returns how many were scheduled. */
  remove(tokens: Iterable<string>): number {
    let removed = 0;
    for (const token of tokens) if (this.members.delete(token)) removed++;
    if (this.members.size === 0) this.clear();
    // Removed members leave the queues at the head; compact when they pile up (add/remove churn).
    else if (this.queue.length + this.fresh.length > 2 * this.members.size + 1024) this.compact();
    return removed;
  }

  clear(): void {
    this.members.clear();
    this.queue = [];
    this.fresh = [];
    this.head = this.freshHead = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  close(): void {
    this.closed = true;
    this.clear();
  }

  /** The scheduled members, in the order they were added. */
  scheduled(): IterableIterator<T> {
    return this.members.values();
  }

  /** The scheduled tokens, in the order they were added. */
  tokens(): string[] {
    return [...this.members.keys()];
  }

  private compact(): void {
    this.queue = this.queue.slice(this.head).filter((m) => this.holds(m));
    this.fresh = this.fresh.slice(this.freshHead).filter((m) => this.holds(m));
    this.head = this.freshHead = 0;
  }

  /** The next member in order (fresh first), or undefined; the array behind a drained head is let go. */
  private next(): T | undefined {
    if (this.freshHead < this.fresh.length) {
      const m = this.fresh[this.freshHead++];
      if (this.freshHead === this.fresh.length) {
        this.fresh = [];
        this.freshHead = 0;
      }
      return m;
    }
    if (this.head >= this.queue.length) return undefined;
    const m = this.queue[this.head++];
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return m;
  }

  /** The time one round over every member takes now: the interval, stretched to fit the request budget. */
  private intervalMs(): number {
    return this.options.intervalMs * Math.max(1, this.options.stretch?.() ?? 1);
  }

  /** Arms the tick timer: `fired` again when the delay is the one it had (no new Timeout per tick), else a new one. */
  private arm(fired: NodeJS.Timeout | null, ms: number): void {
    if (fired !== null && ms === this.timerMs && typeof fired.refresh === 'function') {
      this.timer = fired.refresh();
      return;
    }
    this.timerMs = ms;
    this.timer = setTimeout(() => this.tick(), ms);
    this.timer.unref?.();
  }

  private tick(): void {
    const fired = this.timer;
    this.timer = null;
    if (this.closed || this.members.size === 0) return;
    const now = this.options.now();
    const elapsed = Math.max(0, now - this.lastTick);
    this.lastTick = now;
    const n = this.members.size;
    // Share of the list that fell due since the last tick; never more than one round.
    // Read once per tick: the stretch asks the request budget, and the next tick's period uses it too.
    const intervalMs = this.intervalMs();
    this.budget = Math.min(n, this.budget + (n * elapsed) / intervalMs);
    let due = Math.floor(this.budget);
    this.budget -= due;
    // Skipping removed members costs no budget; at most one pass over the queues per tick.
    const steps = this.fresh.length - this.freshHead + (this.queue.length - this.head);
    for (let s = 0; due > 0 && s < steps; s++) {
      const member = this.next();
      if (!member) break;
      if (!this.holds(member)) continue;
      due--;
      this.queue.push(member);
      this.onDue(member);
    }
    this.arm(fired, watchTickMs(intervalMs, this.members.size, this.options.maxTickMs));
    this.afterTick();
  }
}
