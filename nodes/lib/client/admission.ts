/**
 * What an attempt takes before it goes on the wire: a connection slot, its
 * place in the request budget (the local one, then the fleet's), the access
 * token, and its fence's word. Taken in that order because the budget counts
 * what goes on the wire: a place taken while waiting for a slot was spent
 * when the slot came, and messages queued behind stalled ones went out back
 * to back, over the limit. And the token is taken last, when the request is
 * sent: one peeked before a long wait could expire in the queue. Every wait is
 * bounded by the message's budget and its caller's abort.
 */
import { ChargingError, closedError } from '../errors';
import type { ConcurrencyLimiter, Release } from './concurrency-limiter';
import type { Waits } from './deadlines';
import type { BudgetPriority, RequestBudget } from './request-budget';
import type { AccessToken, TokenCache } from './token-cache';
import type { RequestMetrics } from '../metrics/observers';

/** What admission needs to know of a request. */
export interface Admittable {
  /** words for messages: "START", "STOP", "progress query" */
  what: string;
  /** the caller's abort (a node's close): cancels waiting */
  signal?: AbortSignal;
  /** place in the request budget: commands and queries before watch polls (default command) */
  priority?: BudgetPriority;
  /**
   * Asked right before each attempt goes on the wire (slot, budget and token
   * taken): false, or no answer within FENCE_MAX_MS, and the attempt is not
   * sent. A replica that lost its lease on a target sends nothing for it.
   */
  mayProceed?: () => boolean | Promise<boolean>;
}

export interface AdmissionContext {
  tokens: TokenCache;
  limiter: ConcurrencyLimiter;
  /** Max requests per second; absent: no limit */
  budget?: RequestBudget;
  /** Coordinate replicas: the fleet's budget, taken after the local one (absent: this replica alone) */
  shared?: SharedBudgetGate;
  waits: Waits;
  /** the message's budget, for messages: max(maxTotalMs, timeoutMs) */
  messageBudgetMs: number;
  isClosed: () => boolean;
  /** told the requests, their retries, 429s and waits for the budget (metrics/observers.ts) */
  metrics: RequestMetrics;
}

/**
 * The fleet's request budget as the client sees it (nodes/lib/fleet/budget.ts
 * implements it; the client loads no Redis code of its own). take() never throws.
 */
export interface SharedBudgetGate {
  take(maxWaitMs: number, rate: number): Promise<{ kind: 'go'; delayMs: number } | { kind: 'wait'; waitMs: number } | { kind: 'unavailable' }>;
  /** requests per second this replica may use alone while Redis is away */
  fallbackRate(): number;
}

/** An attempt cleared to go: its slot (released when the exchange ends) and the token it carries. */
export interface Admitted {
  slot: Release;
  token: AccessToken;
}

/** What an attempt holds so far when it has to wait for the rest. */
export interface Held {
  slot: Release | null;
  /** its place in the budget is taken (the local one; the fleet's is always waited for) */
  placeTaken: boolean;
  /** the fence's answer when everything else was taken at once and it was not a plain yes: read as the last step */
  fence?: boolean | Promise<boolean>;
}

/** Longest wait for mayProceed: a fence that cannot answer in time says no (the lease it guards may be gone). */
export const FENCE_MAX_MS = 1_000;

/** Longest wait reserved in the fleet's budget at once: a reservation given up is lost to the fleet, so none is made far ahead. */
const SHARED_MAX_WAIT_MS = 2_000;

/**
 * How late a send may be on its reserved start: one spacing, which keeps any
 * 1 s window at rate + 1, but never under 10 ms. Timers and a busy event loop
 * are that late anyway, and at 10 000/s (0.1 ms apart) one spacing would call
 * nearly every answer slow and double the Redis round trips; above 100/s a
 * window may then hold 1 % more.
 */
const STALE_AFTER_MIN_MS = 10;

const cancelledByNode = () => closedError('node');

/** Requests their fence kept off the wire (a lease handed over): not a request to the service, so the metrics leave them out. */
const fenceRefusals = new WeakSet<ChargingError>();
const markFenced = (err: ChargingError): ChargingError => (fenceRefusals.add(err), err);
export const refusedByFence = (err: unknown): boolean => err instanceof ChargingError && fenceRefusals.has(err);

/** A fence's plain no, asked from the budget's queue: a promise or a throw is not a no there (passFence reads the fence again). */
function saysNo(fence: NonNullable<Admittable['mayProceed']>): boolean {
  try {
    const answer = fence();
    if (answer instanceof Promise) answer.catch(() => undefined);
    return answer === false;
  } catch {
    return false;
  }
}

export class Admission {
  constructor(private readonly ctx: AdmissionContext) {}

  /** Why no attempt may start now (the configuration or the node closed), or null. */
  stopped(req: Admittable): ChargingError | null {
    if (this.ctx.isClosed()) return closedError('configuration');
    if (req.signal?.aborted) return closedError('node');
    return null;
  }

  /**
   * Everything taken at once, without a promise (the common case: a free
   * slot, the budget's place and a cached token), or what was taken so far.
   */
  tryAdmit(req: Admittable): Admitted | Held {
    const slot = this.ctx.limiter.tryAcquire();
    if (!slot) return { slot, placeTaken: false };
    // Each attempt is a request the operator counts: it takes its place in the budget (a resend after a
    // stale pooled socket, inside the exchange, does not: the first never reached the server).
    const budget = this.ctx.budget;
    // The fleet's budget is asked in Redis: never synchronous.
    if (budget && (this.ctx.shared || !budget.tryTake(req.priority ?? 'command'))) return { slot, placeTaken: false };
    const token = this.ctx.tokens.peek();
    if (!token) return { slot, placeTaken: true };
    // The fence last, right before the wire: a plain yes goes at once (a watch poll with replicas, every poll).
    if (req.mayProceed) {
      let fence: boolean | Promise<boolean>;
      try {
        fence = req.mayProceed();
      } catch {
        return { slot, placeTaken: true }; // asked again by admit, which says why
      }
      if (fence !== true) {
        if (fence instanceof Promise) fence.catch(() => undefined); // read by admit; never an unhandled rejection
        return { slot, placeTaken: true, fence };
      }
    }
    return { slot, token };
  }

  /** The rest of an admission that tryAdmit could not finish; the slot is given back if it fails. */
  async admit(req: Admittable, budgetEnd: number, held: Held): Promise<Admitted> {
    let slot = held.slot;
    try {
      slot ??= this.ctx.limiter.tryAcquire() ?? (await this.waitForSlot(req, budgetEnd));
      const budget = this.ctx.budget;
      const fenced = { off: false };
      if (budget && !held.placeTaken) {
        // No token yet (the first request, or after a 401): fetch it before taking a place, so that the place is not spent waiting.
        if (!this.ctx.tokens.peek()) await this.waitForToken(req, budgetEnd);
        const waitedFrom = this.ctx.waits.now();
        const queued = !budget.tryTake(req.priority ?? 'command');
        if (queued) await this.waitForBudget(req, budget, budgetEnd, fenced);
        // Let go without a place (its fence said no): it asks no reservation of the fleet either; passFence says why.
        const shared = this.ctx.shared && !fenced.off;
        if (shared) await this.waitForShared(req, this.ctx.shared as SharedBudgetGate, budget, budgetEnd);
        if (queued || shared) this.ctx.metrics.budgetWaited((this.ctx.waits.now() - waitedFrom) / 1000);
      }
      // Taken now, as the request goes out: a token that expired while the request queued is not sent.
      const token = this.ctx.tokens.peek() ?? (await this.waitForToken(req, budgetEnd));
      // Waiting may have spanned a close: a slot granted just before it must not send after it.
      const stopped = this.stopped(req);
      if (stopped) throw stopped;
      if (req.mayProceed) await this.passFence(req, req.mayProceed, budgetEnd, fenced.off ? false : held.fence);
      const admitted = { slot, token };
      slot = null;
      return admitted;
    } finally {
      slot?.();
    }
  }

  /** The token flight, bounded by the message's budget and its caller's abort. */
  private waitForToken(req: Admittable, budgetEnd: number): Promise<AccessToken> {
    const wait = this.ctx.waits.begin<AccessToken>(
      budgetEnd,
      () => new ChargingError('TIMEOUT', `${req.what}: no access token within the time allowed for the message (${this.budgetSeconds()} s); nothing was sent`, { retryable: false }),
      cancelledByNode,
      req.signal,
    );
    this.ctx.tokens.get().then(
      (t) => wait.resolve(t),
      (e: Error) => wait.reject(e),
    );
    return wait.promise;
  }

  /** A place in the queue for a slot, bounded by the message's budget and its caller's abort. */
  private waitForSlot(req: Admittable, budgetEnd: number): Promise<Release> {
    const wait = this.ctx.waits.begin<Release>(
      budgetEnd,
      () => new ChargingError('TIMEOUT', `${req.what}: no free connection within the time allowed for the message (${this.budgetSeconds()} s; Max in flight is reached); nothing was sent`),
      cancelledByNode,
      req.signal,
      () => this.ctx.limiter.forget(wait),
    );
    if (!wait.settled) this.ctx.limiter.enqueue(wait, req.priority ?? 'command');
    return wait.promise;
  }

  /**
   * A place in the local budget's queue, bounded by the message's budget and its caller's abort. A fenced request whose fence says a plain no
   * when its turn comes is let go without one (`fenced.off`): a watch poll
   * whose lease went while it queued must not hold up the polls of the
   * tokens still held (after a hand-over, several may queue at once).
   */
  private waitForBudget(req: Admittable, budget: RequestBudget, budgetEnd: number, fenced?: { off: boolean }): Promise<void> {
    const wait = this.ctx.waits.begin<void>(
      budgetEnd,
      () => this.budgetTimeout(req),
      cancelledByNode,
      req.signal,
      () => budget.forget(wait),
    );
    const fence = req.mayProceed;
    const dropNow = fence && fenced ? () => (fenced.off = saysNo(fence)) : undefined;
    if (!wait.settled) budget.enqueue(wait, req.priority ?? 'command', dropNow);
    return wait.promise;
  }

  /**
   * A start in the fleet's budget after the local one (docs/fleet.md,
   * "Budget"): reserved in Redis, then waited for here. Redis away: this
   * replica keeps to its share of the limit until Redis answers again.
   *
   * What is spaced is the send, not only the reservation: if the process stood
   * still (a GC pause, SIGSTOP, a blocked event loop) past a reserved start,
   * every request whose start passed meanwhile would go out at once when it
   * wakes. A start more than one spacing (STALE_AFTER_MIN_MS at least) behind
   * when its waiter runs is stale: a new one is taken instead (its time long
   * gone, giving it up costs the fleet nothing). An answer from Redis slower
   * than that may have waited in this process's socket while it stood still,
   * so its start may be older than it says: taken again once; a second slow
   * answer is Redis being slow, judged from when it came.
   */
  private async waitForShared(req: Admittable, shared: SharedBudgetGate, budget: RequestBudget, budgetEnd: number): Promise<void> {
    const { waits } = this.ctx;
    // The rate the local place was spaced at: the fleet's whole rate unless Redis was already known away.
    const placedAt = budget.currentRate;
    let slowAnswerRetaken = false;
    for (;;) {
      const left = budgetEnd - waits.now();
      if (left <= 0) throw this.budgetTimeout(req);
      const rate = budget.currentRate;
      const askedAt = waits.now();
      const taken = await shared.take(Math.min(left, SHARED_MAX_WAIT_MS), rate);
      const answeredAt = waits.now();
      const stopped = this.stopped(req);
      if (stopped) throw stopped;
      if (taken.kind === 'unavailable') {
        // Redis went away while this request waited: its local place was spaced at the fleet's whole rate. One more
        // at this replica's share, for every request placed so, or those queued while Redis was silent (each
        // waiting out its command timeout) go out at the whole rate beside the other replicas' (a black hole: 14 in
        // a second at 8/s), and every replica sends one extra in the outage's first second (3 replicas at 5/s: 9).
        budget.setCeiling(shared.fallbackRate());
        if (placedAt > budget.currentRate && !budget.tryTake(req.priority ?? 'command')) await this.waitForBudget(req, budget, budgetEnd);
        return;
      }
      budget.setCeiling(null);
      const pause = taken.kind === 'go' ? taken.delayMs : taken.waitMs;
      if (taken.kind === 'wait' && pause >= budgetEnd - waits.now()) throw this.budgetTimeout(req);
      const staleAfter = Math.max(1000 / rate, STALE_AFTER_MIN_MS);
      if (taken.kind === 'go' && answeredAt - askedAt > staleAfter && !slowAnswerRetaken) {
        slowAnswerRetaken = true;
        continue;
      }
      if (pause > 0) await waits.sleep(pause, () => (this.ctx.isClosed() ? closedError('configuration') : closedError('node')), req.signal);
      if (taken.kind === 'go' && waits.now() - (answeredAt + pause) <= staleAfter) return;
    }
  }

  /** The fence's word, bounded: no answer in time, a failure, or a no, and nothing is sent. */
  private async passFence(req: Admittable, fence: NonNullable<Admittable['mayProceed']>, budgetEnd: number, given: Held['fence']): Promise<void> {
    const { waits } = this.ctx;
    // NETWORK as for a connection never made: surely not sent, and not tried again (the lease will not come back by itself).
    const refused = (why: string) => markFenced(new ChargingError('NETWORK', `${req.what}: ${why}; nothing was sent`, { retryable: false }));
    let answer: boolean | Promise<boolean>;
    try {
      answer = given ?? fence();
    } catch (err) {
      throw refused(`checking that this replica may still send failed (${(err as Error)?.message ?? String(err)})`);
    }
    if (answer instanceof Promise) {
      const wait = waits.begin<boolean>(Math.min(budgetEnd, waits.now() + FENCE_MAX_MS), () => refused(`whether this replica may still send could not be checked within ${FENCE_MAX_MS} ms`), cancelledByNode, req.signal);
      answer.then(
        (ok) => wait.resolve(ok),
        (err: Error) => wait.reject(refused(`checking that this replica may still send failed (${err?.message ?? String(err)})`)),
      );
      answer = await wait.promise;
    }
    if (answer !== true) throw refused('this replica no longer holds the target (another replica sends its commands now)');
    const stopped = this.stopped(req);
    if (stopped) throw stopped;
  }

  private budgetTimeout(req: Admittable): ChargingError {
    return new ChargingError('TIMEOUT', `${req.what}: not sent within the time allowed for the message (${this.budgetSeconds()} s): Max requests per second is reached; nothing was sent`);
  }

  private budgetSeconds(): number {
    return Math.round(this.ctx.messageBudgetMs / 1000);
  }
}
