/**
 * Request budget of one configuration (#17.3): at most `perSec` requests start per
 * second, shared by every node. Commands and queries (priority 0) go before watch
 * polls (priority 1); a poll queued for a key already queued is merged (both callers
 * get the same slot) so polls never queue without end. A 429 halves the rate used;
 * each good answer climbs it back towards the limit.
 *
 * Not yet wired into request.ts: see the helper's report.
 * Runs on the monotonic clock: a wall-clock step never stalls or bursts the budget.
 */
import { monotonicNow } from '../clock';

interface Entry { key?: string; resolvers: Array<() => void>; }

export class RequestBudget {
  private rate: number;
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly queues: Entry[][] = [[], []];

  /** limit 0 / NaN = no limit */
  constructor(private readonly limit: number, private readonly now: () => number = monotonicNow) {
    this.rate = limit;
  }

  get enabled(): boolean { return this.limit > 0; }
  /** requests per second currently used (lower than the limit after a 429) */
  get currentRate(): number { return this.rate; }
  /** polls waiting: what a watcher needs to stretch its schedule */
  get queuedPolls(): number { return this.queues[1].length; }

  /** Resolves when the request may start. priority 0 = command/query, 1 = poll. */
  acquire(priority: 0 | 1 = 0, key?: string): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const q = this.queues[priority];
      const same = key === undefined ? undefined : q.find((e) => e.key === key);
      if (same) same.resolvers.push(resolve);
      else q.push({ key, resolvers: [resolve] });
      this.pump();
    });
  }

  /** A 429 halves the rate used (not below 1 per 60 s). */
  onThrottled(): void {
    if (this.enabled) this.rate = Math.max(this.rate / 2, 1 / 60);
  }

  /** A good answer climbs back by a tenth of the limit. */
  onGood(): void {
    if (this.enabled) this.rate = Math.min(this.limit, this.rate + this.limit / 10);
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private pump(): void {
    if (this.timer) return;
    const wait = this.next - this.now();
    if (wait > 0) {
      this.timer = setTimeout(() => { this.timer = undefined; this.pump(); }, wait);
      return;
    }
    const entry = this.queues[0].shift() ?? this.queues[1].shift();
    if (!entry) return;
    this.next = Math.max(this.next, this.now()) + 1000 / this.rate;
    for (const r of entry.resolvers) r();
    if (this.queues[0].length + this.queues[1].length > 0) this.pump();
  }
}
