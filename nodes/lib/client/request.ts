/**
 * The one retry loop (DESIGN §3 "401", "retries", "429", "deadlines"): for each
 * attempt take a token and a slot, make one exchange, classify the answer, and
 * decide whether to try again. A message's whole journey (queue, token,
 * exchanges, pauses) is bounded by its budget; each exchange by the timeout.
 */
import { ChargingError, closedError } from '../errors';
import { backoffDelay } from './backoff';
import { bodyProblemError, describeBody, Operation, statusError, transportError } from './classify';
import type { ConcurrencyLimiter, Release } from './concurrency-limiter';
import type { BudgetPriority, RequestBudget } from './request-budget';
import type { Waits } from './deadlines';
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
}

export interface RequestContext {
  destination: Destination;
  tokens: TokenCache;
  limiter: ConcurrencyLimiter;
  /** Max requests per second; absent: no limit */
  budget?: RequestBudget;
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

export class RequestRunner {
  /** headers for the current token, built once per token rather than once per request */
  private headersFor: { token: string; get: Record<string, string>; post: Record<string, string> } | null = null;

  constructor(private readonly ctx: RequestContext) {}

  /** Resolves with an accepted response (see Request.accept); rejects with a ChargingError. */
  async run(req: Request): Promise<RawResponse> {
    const { waits, policy, timeoutMs } = this.ctx;
    const budgetEnd = waits.now() + Math.max(policy.maxTotalMs, timeoutMs);
    const maxAttempts = req.method === 'GET' ? policy.getAttempts : policy.postAttempts;
    let attempt = 0;
    let refreshedAfter401 = false;
    for (;;) {
      attempt++;
      const result = await this.attempt(req, budgetEnd, refreshedAfter401);
      if ('res' in result) return result.res;
      const { failure, token } = result;
      if (failure.statusCode === 401 && failure.code === 'AUTH') {
        if (!refreshedAfter401) {
          // Spec §5.5: tokens expire; a 401 may mean ours was revoked or expired early.
          // One new token, one retry; the request surely was not processed.
          refreshedAfter401 = true;
          this.ctx.tokens.invalidate(token);
          attempt--; // the 401 retry does not count against the retry budget
          continue;
        }
        // A fresh token did not help: another one will not either, for now.
        this.ctx.tokens.refusedByService(token, failure);
      }
      await this.pauseOrGiveUp(req, failure, attempt, maxAttempts, budgetEnd);
    }
  }

  /** One attempt: a token, a slot, one exchange, its result classified. */
  private async attempt(req: Request, budgetEnd: number, afterFreshToken: boolean): Promise<{ res: RawResponse } | { failure: ChargingError; token: string }> {
    const { waits, timeoutMs } = this.ctx;
    this.checkOpen(req);
    // The common case takes no promise hop: a cached token and a free slot are taken synchronously.
    const token = this.ctx.tokens.peek() ?? (await this.waitForToken(req, budgetEnd));
    // Each attempt is a request the operator counts: it takes its place in the budget (a resend after a
    // stale pooled socket, inside the exchange, does not: the first never reached the server).
    const budget = this.ctx.budget;
    if (budget && !budget.tryTake(req.priority ?? 'command')) await this.waitForBudget(req, budget, budgetEnd);
    const release = this.ctx.limiter.tryAcquire() ?? (await this.waitForSlot(req, budgetEnd));
    try {
      // Waiting may have spanned a close: a slot granted just before it must not send after it.
      this.checkOpen(req);
    } catch (err) {
      release();
      throw err;
    }
    const allowed = Math.min(timeoutMs, Math.max(1, budgetEnd - waits.now()));
    // A GET is cut when its node closes; a START/STOP on the wire runs to its deadline so that its outcome is known.
    const signal = req.method === 'GET' ? req.signal : undefined;
    const ex = waits.exchange(allowed, signal);
    let res: RawResponse;
    try {
      res = await this.ctx.destination.send({ method: req.method, url: req.url, data: req.data, headers: this.headers(token, req.method) }, ex);
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      if (ex.ended === 'cancelled') throw closedError('node');
      return { failure: transportError(err, req, this.ctx.where, allowed), token: token.value };
    } finally {
      waits.finished(ex, signal);
      release();
    }
    if (ex.ended === 'cancelled') throw closedError('node');
    if (res.status === 429) budget?.onThrottled();
    else if (res.status < 500) budget?.onGood(); // any answer but 429 or a 5xx: the rate is not the problem
    if (!req.accept(res.status)) return { failure: statusError(res, req, describeBody(res.text, this.ctx.redactor), afterFreshToken), token: token.value };
    // A 2xx progress answer is only as good as its body; "no session" (404, 204) needs none.
    if (res.bodyProblem && req.method === 'GET' && res.status !== 404 && res.status !== 204) {
      return { failure: bodyProblemError(res, req, this.ctx.where, allowed, this.ctx.maxBodyBytes), token: token.value };
    }
    return { res };
  }

  /** Waits before the next attempt, or throws the failure when no attempt or time is left. */
  private async pauseOrGiveUp(req: Request, failure: ChargingError, attempt: number, maxAttempts: number, budgetEnd: number): Promise<void> {
    const { waits, policy } = this.ctx;
    const left = budgetEnd - waits.now();
    if (!failure.retryable || attempt >= maxAttempts || left <= 0) throw giveUp(failure, attempt);
    const delay = Math.max(backoffDelay(attempt, policy.baseDelayMs, policy.maxDelayMs), failure.retryAfterMs ?? 0);
    if (delay >= left) throw giveUp(failure, attempt);
    await waits.sleep(delay, () => (this.ctx.isClosed() ? closedError('configuration') : closedError('node')), req.signal);
  }

  private checkOpen(req: Request): void {
    if (this.ctx.isClosed()) throw closedError('configuration');
    if (req.signal?.aborted) throw closedError('node');
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
    if (!wait.settled) this.ctx.limiter.enqueue(wait);
    return wait.promise;
  }

  /** A place in the request budget's queue, bounded by the message's budget and its caller's abort. */
  private waitForBudget(req: Request, budget: RequestBudget, budgetEnd: number): Promise<void> {
    const wait = this.ctx.waits.begin<void>(
      budgetEnd,
      () => new ChargingError('TIMEOUT', `${req.what}: not sent within the time allowed for the message (${this.budgetSeconds()} s): Max requests per second is reached; nothing was sent`),
      cancelledByNode,
      req.signal,
      () => budget.forget(wait),
    );
    if (!wait.settled) budget.enqueue(wait, req.priority ?? 'command');
    return wait.promise;
  }

  private budgetSeconds(): number {
    return Math.round(Math.max(this.ctx.policy.maxTotalMs, this.ctx.timeoutMs) / 1000);
  }
}

function giveUp(failure: ChargingError, attempts: number): ChargingError {
  if (attempts <= 1 || failure.outcomeUnknown || !failure.retryable) return failure;
  return failure.withMessage(`${failure.message} (gave up after ${attempts} attempts)`);
}
