/**
 * The one retry loop (DESIGN §3 "401", "retries", "429", "deadlines"): for
 * each attempt pass admission (admission.ts: slot, budget, token, fence), make
 * one exchange, classify the answer, and decide whether to try again. A
 * message's whole journey (queue, token, exchanges, pauses) is bounded by its
 * budget; each exchange by the timeout.
 */
import { ChargingError, closedError, isChargingError } from '../errors';
import type { RequestKind } from '../metrics/observers';
import { Admission, refusedByFence, type AdmissionContext, type Admittable } from './admission';
import { backoffDelay } from './backoff';
import { bodyProblemError, Operation, statusError, transportError, unreached } from './classify';
import { describeBody } from './response-body';
import type { Release } from './concurrency-limiter';
import type { Exchange } from './deadlines';
import type { Redactor } from './redactor';
import type { AccessToken } from './token-cache';
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

export interface Request extends Operation, Admittable {
  /** what the metrics count it as */
  kind: RequestKind;
  url: string;
  /** a JSON body (POST) */
  data?: string;
  /** statuses returned to the caller rather than thrown */
  accept: (status: number) => boolean;
  /** the caller's abort (a node's close): cancels waiting, and a GET on the wire */
  signal?: AbortSignal;
}

export interface RequestContext extends Omit<AdmissionContext, 'messageBudgetMs'> {
  destination: Destination;
  redactor: Redactor;
  policy: RetryPolicy;
  timeoutMs: number;
  maxBodyBytes: number;
  /** scheme://host of the service, for messages */
  where: string;
  /** sent with every service request (an API gateway's key header); never to the token endpoint */
  extraHeaders?: Record<string, string>;
}

/** A failed attempt: the error, the token it carried, and whether it surely never reached the service (no connection). */
type Failed = { failure: ChargingError; token: string; unreached?: boolean };
type Attempted = { res: RawResponse } | Failed;

export class RequestRunner {
  /** headers for the current token, built once per token rather than once per request */
  private headersFor: { token: string; get: Record<string, string>; post: Record<string, string> } | null = null;
  private readonly admission: Admission;

  constructor(private readonly ctx: RequestContext) {
    this.admission = new Admission({ ...ctx, messageBudgetMs: Math.max(ctx.policy.maxTotalMs, ctx.timeoutMs) });
  }

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
    const startedAt = waits.now();
    const budgetEnd = startedAt + Math.max(policy.maxTotalMs, timeoutMs);
    try {
      // The metrics are told when the journey ends, on the steps it takes anyway: no promise of their own on the common path.
      return this.attempt(req, budgetEnd, false).then(
        (result) => ('res' in result ? this.answered(req, startedAt, result.res) : this.retry(req, budgetEnd, result, startedAt)),
        (err: unknown) => this.failed(req, startedAt, err),
      );
    } catch (err) {
      // Nothing here is expected to throw; if it ever did, the caller still gets a rejection, never a throw into its timer.
      return Promise.reject(err as Error).catch((e: unknown) => this.failed(req, startedAt, e));
    }
  }

  private answered(req: Request, startedAt: number, res: RawResponse): RawResponse {
    this.ctx.metrics.finished(req.kind, null, (this.ctx.waits.now() - startedAt) / 1000);
    return res;
  }

  /** A request that ends in an error; one its fence kept off the wire is no request to the service. */
  private failed(req: Request, startedAt: number, err: unknown): never {
    if (!refusedByFence(err)) this.ctx.metrics.finished(req.kind, isChargingError(err) ? err.code : 'INTERNAL', (this.ctx.waits.now() - startedAt) / 1000);
    throw err;
  }

  /**
   * After a failed first attempt: refresh the token after a 401, pause and try
   * again, or give up (DESIGN §3). A progress query that never reached the
   * service (refused, DNS, a proxy that did not let it through: a service
   * restarting, a DNS blip) is tried again until the message's time is up, its
   * pauses growing to maxDelayMs, without using up its attempts: a service back
   * within the 30 s is reached. START/STOP keep their postAttempts.
   */
  private async retry(req: Request, budgetEnd: number, first: Failed, startedAt: number): Promise<RawResponse> {
    try {
      return this.answered(req, startedAt, await this.retryLoop(req, budgetEnd, first));
    } catch (err) {
      return this.failed(req, startedAt, err);
    }
  }

  /** The attempts after the first, as retry() says. */
  private async retryLoop(req: Request, budgetEnd: number, first: Failed): Promise<RawResponse> {
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
      this.ctx.metrics.retried(req.kind);
      result = await this.attempt(req, budgetEnd, refreshedAfter401);
      if ('res' in result) return result.res;
    }
  }

  /** One attempt: admission (at once in the common case, without a promise of its own), then one exchange. */
  private attempt(req: Request, budgetEnd: number, afterFreshToken: boolean): Promise<Attempted> {
    const stopped = this.admission.stopped(req);
    if (stopped) return Promise.reject(stopped);
    const held = this.admission.tryAdmit(req);
    if ('token' in held) return this.exchange(req, held.token, held.slot, budgetEnd, afterFreshToken);
    return this.admission.admit(req, budgetEnd, held).then((admitted) => this.exchange(req, admitted.token, admitted.slot, budgetEnd, afterFreshToken));
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
    if (res.status === 429) this.ctx.metrics.throttled(req.kind);
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

  private headers(token: AccessToken, method: 'GET' | 'POST'): Record<string, string> {
    let h = this.headersFor;
    if (!h || h.token !== token.value) {
      const get = { ...this.ctx.extraHeaders, Authorization: `Bearer ${token.value}`, Accept: 'application/json' };
      h = this.headersFor = { token: token.value, get, post: { ...get, 'Content-Type': 'application/json; charset=utf-8' } };
    }
    return method === 'GET' ? h.get : h.post;
  }
}

function giveUp(failure: ChargingError, attempts: number): ChargingError {
  if (attempts <= 1 || failure.outcomeUnknown || !failure.retryable) return failure;
  return failure.withMessage(`${failure.message} (gave up after ${attempts} attempts)`);
}
