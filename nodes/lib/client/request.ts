/**
 * The one retry loop (DESIGN §3 "401", "retries", "429", "deadlines"): for each
 * attempt take a token and a slot, make one exchange, classify the answer, and
 * decide whether to try again. A message's whole journey (queue, token,
 * exchanges, pauses) is bounded by its budget; each exchange by the timeout.
 */
import { ChargingError, closedError } from '../errors';
import { backoffDelay } from './backoff';
import { bodyProblemError, Operation, statusError, transportError, unreached } from './classify';
import { describeBody } from './response-body';
import type { ConcurrencyLimiter, Release } from './concurrency-limiter';
import type { BudgetPriority, RequestBudget } from './request-budget';
import type { Exchange, Waits } from './deadlines';
import type { Redactor } from './redactor';
import type { AccessToken, TokenCache } from './token-cache';
import { Destination, RawResponse, TransportError } from './transport';

export interface RetryPolicy {
  /** attempts in all for a progress query (GET), the first included */
  getAttempts: number;
  /** attempts in all for START/STOP, counted only over failures that surely were not processed */
  postAttempts: number;
  /** attempts in all for one token flight (asking for a token again is harmless) */
  tokenAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** a message, queue, token, retries and pauses included, is answered within this long (at least one timeout) */
  maxTotalMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  getAttempts: 4,
  postAttempts: 3,
  tokenAttempts: 3,
  baseDelayMs: 250,
  maxDelayMs: 5_000,
  maxTotalMs: 30_000,
};

export interface Request extends Operation {
  url: string;
  /** a JSON body (POST) */
  data?: string;
  /** statuses returned to the caller rather than thrown */
  accept: (status: number) => boolean;
  /** the caller's abort (a node's close): cancels waiting, and a GET on the wire */
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

export interface RequestContext {
  destination: Destination;
  tokens: TokenCache;
  limiter: ConcurrencyLimiter;
  /** Max requests per second; absent: no limit */
  budget?: RequestBudget;
  /** Coordinate replicas: the fleet's budget, taken after the local one (absent: this replica alone) */
  shared?: SharedBudgetGate;
  waits: Waits;
  redactor: Redactor;
  policy: RetryPolicy;
  timeoutMs: number;
  maxBodyBytes: number;
  /** scheme://host of the service, for messages */
  where: string;
  /** sent with every service request (an API gateway's key header); never to the token endpoint */
  extraHeaders?: Record<string, string>;
  isClosed: () => boolean;
}

const cancelledByNode = () => closedError('node');

/**
 * The fleet's request budget as the runner sees it (nodes/lib/fleet/budget.ts
 * implements it; the client loads no Redis code of its own). take() never throws.
 */
export interface SharedBudgetGate {
  take(maxWaitMs: number, rate: number): Promise<{ kind: 'go'; delayMs: number } | { kind: 'wait'; waitMs: number } | { kind: 'unavailable' }>;
  /** requests per second this replica may use alone while Redis is away */
  fallbackRate(): number;
}

/** Longest wait for mayProceed: a fence that cannot answer in time says no (the lease it guards may be gone). */
export const FENCE_MAX_MS = 1_000;

/** Longest wait reserved in the fleet's budget at once: a reservation given up is lost to the fleet, so none is made far ahead. */
const SHARED_MAX_WAIT_MS = 2_000;

/** A failed attempt: the error, the token it carried, and whether it surely never reached the service (no connection). */
type Failed = { failure: ChargingError; token: string; unreached?: boolean };
type Attempted = { res: RawResponse } | Failed;

export class RequestRunner {
  /** headers for the current token, built once per token rather than once per request */
  private headersFor: { token: string; get: Record<string, string>; post: Record<string, string> } | null = null;

  constructor(private readonly ctx: RequestContext) {}

  /**
   * Resolves with an accepted response (see Request.accept); rejects with a ChargingError.
   *
   * Written as promise steps rather than nested async functions: the common
   * case (a cached token, a free slot, the first exchange answered) then costs
   * the exchange's own promise and one step per layer, not an async frame and
   * an await per layer. A watch node makes this call a thousand times a second
   * at 10 000 tokens. The retry loop, entered only after a failure, stays async.
   */
  run(req: Request): Promise<RawResponse> {
    const { waits, policy, timeoutMs } = this.ctx;
    const budgetEnd = waits.now() + Math.max(policy.maxTotalMs, timeoutMs);
    try {
      return this.attempt(req, budgetEnd, false).then((result) => ('res' in result ? result.res : this.retry(req, budgetEnd, result)));
    } catch (err) {
      // Nothing here is expected to throw; if it ever did, the caller still gets a rejection, never a throw into its timer.
      return Promise.reject(err as Error);
    }
  }

  /**
   * After a failed first attempt: refresh the token after a 401, pause and try
   * again, or give up (DESIGN §3). A progress query that never reached the
   * service (refused, DNS, a proxy that did not let it through: a service
   * restarting, a DNS blip) is tried again until the message's time is up, its
   * pauses growing to maxDelayMs, without using up its attempts: a service back
   * within the 30 s is reached. START/STOP keep their postAttempts.
   */
  private async retry(req: Request, budgetEnd: number, first: Failed): Promise<RawResponse> {
    const maxAttempts = req.method === 'GET' ? this.ctx.policy.getAttempts : this.ctx.policy.postAttempts;
    let attempt = 1;
    let counted = 1;
    let refreshedAfter401 = false;
    let result: Attempted = first;
    for (;;) {
      const { failure, token, unreached } = result as Failed;
      if (failure.statusCode === 401 && failure.code === 'AUTH' && !refreshedAfter401) {
        // Spec §5.5: tokens expire; a 401 may mean ours was revoked or expired early.
        // One new token, one retry, at once; the request surely was not processed.
        refreshedAfter401 = true;
        this.ctx.tokens.invalidate(token);
        attempt--; // the 401 retry does not count against the retry budget
        counted--;
      } else {
        // A fresh token did not help: another one will not either, for now.
        if (failure.statusCode === 401 && failure.code === 'AUTH') this.ctx.tokens.refusedByService(token, failure);
        const free = unreached && req.method === 'GET';
        await this.pauseOrGiveUp(req, failure, attempt, free ? 0 : counted, maxAttempts, budgetEnd);
        if (free) counted--;
      }
      attempt++;
      counted++;
      result = await this.attempt(req, budgetEnd, refreshedAfter401);
      if ('res' in result) return result.res;
    }
  }

  /**
   * One attempt: a slot, then a place in the budget, then the token, then one
   * exchange, its result classified. In that order because the budget counts
   * what goes on the wire: a place taken while waiting for a slot was spent
   * when the slot came, and messages queued behind stalled ones went out back
   * to back, over the limit. And the token is taken last, when the request is sent:
   * one peeked before a long wait could expire in the queue.
   */
  private attempt(req: Request, budgetEnd: number, afterFreshToken: boolean): Promise<Attempted> {
    const closed = this.closedError(req);
    if (closed) return Promise.reject(closed);
    // The common case takes no promise of its own: a free slot, the budget's place and a cached token are taken synchronously.
    const release = this.ctx.limiter.tryAcquire();
    // A fenced request asks its fence before it goes: never synchronous.
    if (!release || req.mayProceed) return this.attemptAfterWaiting(req, budgetEnd, afterFreshToken, null, false);
    // Each attempt is a request the operator counts: it takes its place in the budget (a resend after a
    // stale pooled socket, inside the exchange, does not: the first never reached the server).
    const budget = this.ctx.budget;
    // The fleet's budget is asked in Redis: never synchronous.
    if (budget && (this.ctx.shared || !budget.tryTake(req.priority ?? 'command'))) return this.attemptAfterWaiting(req, budgetEnd, afterFreshToken, release, false);
    const token = this.ctx.tokens.peek();
    if (!token) return this.attemptAfterWaiting(req, budgetEnd, afterFreshToken, release, true);
    return this.exchange(req, token, release, budgetEnd, afterFreshToken);
  }

  /** An attempt that has to wait for its slot, its place in the budget or its token (each bounded by the message's budget). */
  private async attemptAfterWaiting(req: Request, budgetEnd: number, afterFreshToken: boolean, held: Release | null, budgetTaken: boolean): Promise<Attempted> {
    let release = held;
    try {
      release ??= this.ctx.limiter.tryAcquire() ?? (await this.waitForSlot(req, budgetEnd));
      const budget = this.ctx.budget;
      if (budget && !budgetTaken) {
        // No token yet (the first request, or after a 401): fetch it before taking a place, so that the place is not spent waiting.
        if (!this.ctx.tokens.peek()) await this.waitForToken(req, budgetEnd);
        if (!budget.tryTake(req.priority ?? 'command')) await this.waitForBudget(req, budget, budgetEnd);
        if (this.ctx.shared) await this.waitForShared(req, this.ctx.shared, budget, budgetEnd);
      }
      // Taken now, as the request goes out: a token that expired while the request queued is not sent.
      const token = this.ctx.tokens.peek() ?? (await this.waitForToken(req, budgetEnd));
      // Waiting may have spanned a close: a slot granted just before it must not send after it.
      const closed = this.closedError(req);
      if (closed) throw closed;
      if (req.mayProceed) await this.passFence(req, req.mayProceed, budgetEnd);
      const sending = release;
      release = null;
      return this.exchange(req, token, sending, budgetEnd, afterFreshToken);
    } finally {
      release?.();
    }
  }

  /** The exchange of an attempt, its slot released and its deadline dropped however it ends. */
  private exchange(req: Request, token: AccessToken, release: Release, budgetEnd: number, afterFreshToken: boolean): Promise<Attempted> {
    const { waits, timeoutMs } = this.ctx;
    const allowed = Math.min(timeoutMs, Math.max(1, Math.floor(budgetEnd - waits.now())));
    // A GET is cut when its node closes; a START/STOP on the wire runs to its deadline so that its outcome is known.
    const signal = req.method === 'GET' ? req.signal : undefined;
    const ex = waits.exchange(allowed, signal);
    const end = () => {
      waits.finished(ex, signal);
      release();
    };
    let sent: Promise<RawResponse>;
    try {
      sent = this.ctx.destination.send({ method: req.method, url: req.url, data: req.data, headers: this.headers(token, req.method) }, ex);
    } catch (err) {
      end();
      return Promise.reject(err as Error);
    }
    return sent.then(
      (res) => {
        end();
        return this.outcome(req, res, ex, token, allowed, afterFreshToken);
      },
      (err: unknown) => {
        end();
        if (!(err instanceof TransportError)) throw err;
        if (ex.ended === 'cancelled') throw closedError('node');
        return { failure: transportError(err, req, this.ctx.where, allowed), token: token.value, unreached: unreached(err) };
      },
    );
  }

  /** An answer: handed back, or a failure to retry or report. */
  private outcome(req: Request, res: RawResponse, ex: Exchange, token: AccessToken, allowed: number, afterFreshToken: boolean): Attempted {
    if (ex.ended === 'cancelled') throw closedError('node');
    const budget = this.ctx.budget;
    if (budget) {
      if (res.status === 429) budget.onThrottled(ex.deadline - ex.allowedMs);
      else if (res.status < 500) budget.onGood(); // any answer but 429 or a 5xx: the rate is not the problem
    }
    if (!req.accept(res.status)) return { failure: statusError(res, req, describeBody(res.text, this.ctx.redactor), afterFreshToken), token: token.value };
    // A 2xx progress answer is only as good as its body; "no session" (404, 204) needs none.
    if (res.bodyProblem && req.method === 'GET' && res.status !== 404 && res.status !== 204) {
      return { failure: bodyProblemError(res, req, this.ctx.where, allowed, this.ctx.maxBodyBytes), token: token.value };
    }
    return { res };
  }

  /** Waits before the next attempt, or throws the failure when no attempt or time is left. */
  private async pauseOrGiveUp(req: Request, failure: ChargingError, attempt: number, counted: number, maxAttempts: number, budgetEnd: number): Promise<void> {
    const { waits, policy } = this.ctx;
    const left = budgetEnd - waits.now();
    if (!failure.retryable || counted >= maxAttempts || left <= 0) throw giveUp(failure, attempt);
    const delay = Math.max(backoffDelay(attempt, policy.baseDelayMs, policy.maxDelayMs), failure.retryAfterMs ?? 0);
    if (delay >= left) throw giveUp(failure, attempt);
    await waits.sleep(delay, () => (this.ctx.isClosed() ? closedError('configuration') : closedError('node')), req.signal);
  }

  /** Why no attempt may start now (the configuration or the node closed), or null. */
  private closedError(req: Request): ChargingError | null {
    if (this.ctx.isClosed()) return closedError('configuration');
    if (req.signal?.aborted) return closedError('node');
    return null;
  }

  private headers(token: AccessToken, method: 'GET' | 'POST'): Record<string, string> {
    let h = this.headersFor;
    if (!h || h.token !== token.value) {
      const get = { ...this.ctx.extraHeaders, Authorization: `Bearer ${token.value}`, Accept: 'application/json' };
      h = this.headersFor = { token: token.value, get, post: { ...get, 'Content-Type': 'application/json; charset=utf-8' } };
    }
    return method === 'GET' ? h.get : h.post;
  }

  /** The token flight, bounded by the message's budget and its caller's abort. */
  private waitForToken(req: Request, budgetEnd: number): Promise<AccessToken> {
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
  private waitForSlot(req: Request, budgetEnd: number): Promise<Release> {
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

  /** A place in the request budget's queue, bounded by the message's budget and its caller's abort. */
  private waitForBudget(req: Request, budget: RequestBudget, budgetEnd: number): Promise<void> {
    const wait = this.ctx.waits.begin<void>(
      budgetEnd,
      () => this.budgetTimeout(req),
      cancelledByNode,
      req.signal,
      () => budget.forget(wait),
    );
    if (!wait.settled) budget.enqueue(wait, req.priority ?? 'command');
    return wait.promise;
  }

  /**
   * A start in the fleet's budget after the local one (docs/fleet.md,
   * "Budget"): reserved in Redis, then waited for here. Redis away: this
   * replica keeps to its share of the limit until Redis answers again.
   */
  private async waitForShared(req: Request, shared: SharedBudgetGate, budget: RequestBudget, budgetEnd: number): Promise<void> {
    const { waits } = this.ctx;
    for (;;) {
      const left = budgetEnd - waits.now();
      if (left <= 0) throw this.budgetTimeout(req);
      const taken = await shared.take(Math.min(left, SHARED_MAX_WAIT_MS), budget.currentRate);
      const closed = this.closedError(req);
      if (closed) throw closed;
      if (taken.kind === 'unavailable') {
        // Redis just went away: the local place was taken at the fleet's whole rate; take one more at this
        // replica's share, or every replica sends one extra in the outage's first second (3 replicas at 5/s: 9).
        if (budget.setCeiling(shared.fallbackRate()) && !budget.tryTake(req.priority ?? 'command')) await this.waitForBudget(req, budget, budgetEnd);
        return;
      }
      budget.setCeiling(null);
      const pause = taken.kind === 'go' ? taken.delayMs : taken.waitMs;
      if (taken.kind === 'wait' && pause >= budgetEnd - waits.now()) throw this.budgetTimeout(req);
      if (pause > 0) await waits.sleep(pause, () => (this.ctx.isClosed() ? closedError('configuration') : closedError('node')), req.signal);
      if (taken.kind === 'go') return;
    }
  }

  /** The fence's word, bounded: no answer in time, a failure, or a no, and nothing is sent. */
  private async passFence(req: Request, fence: NonNullable<Request['mayProceed']>, budgetEnd: number): Promise<void> {
    const { waits } = this.ctx;
    // NETWORK as for a connection never made: surely not sent, and not tried again (the lease will not come back by itself).
    const refused = (why: string) => new ChargingError('NETWORK', `${req.what}: ${why}; nothing was sent`, { retryable: false });
    let answer: boolean | Promise<boolean>;
    try {
      answer = fence();
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
    const closed = this.closedError(req);
    if (closed) throw closed;
  }

  private budgetTimeout(req: Request): ChargingError {
    return new ChargingError('TIMEOUT', `${req.what}: not sent within the time allowed for the message (${this.budgetSeconds()} s): Max requests per second is reached; nothing was sent`);
  }

  private budgetSeconds(): number {
    return Math.round(Math.max(this.ctx.policy.maxTotalMs, this.ctx.timeoutMs) / 1000);
  }
}

function giveUp(failure: ChargingError, attempts: number): ChargingError {
  if (attempts <= 1 || failure.outcomeUnknown || !failure.retryable) return failure;
  return failure.withMessage(`${failure.message} (gave up after ${attempts} attempts)`);
}
