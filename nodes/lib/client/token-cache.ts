import { ChargingError, closedError } from '../errors';
import { monotonicNow } from '../clock';
import { NO_CLIENT_METRICS, type TokenMetrics } from '../metrics/observers';

/** An access token as the cache keeps it. The value never leaves the client. */
export interface AccessToken {
  value: string;
  /** epoch ms at which the token server says it expires */
  expiresAt: number;
  /** epoch ms from which we ask for a new one (in the background) */
  renewAt: number;
  /** monotonic ms (clock.ts) after which we no longer send it: a little before expiresAt, for clock skew and latency */
  usableUntil: number;
}

export interface TokenResponse {
  accessToken: string;
  /** lifetime in seconds, when the token server sent one */
  expiresIn?: number;
}

export interface TokenCacheOptions {
  /** lifetime assumed when the response has no expires_in: the spec's 30 min */
  defaultLifetimeMs?: number;
  /** shortest lifetime believed: an expires_in below it is raised to it, with a warning */
  minLifetimeMs?: number;
  /** renew this long before expiry, or a tenth of very short lifetimes */
  renewMarginMs?: number;
  /** first pause after a failed token request; doubles up to maxFailureBackoffMs */
  failureBackoffMs?: number;
  maxFailureBackoffMs?: number;
  now?: () => number;
  /** told about things a person should know that are not errors (a lifetime raised to the floor) */
  onWarning?: (text: string) => void;
  /** told each token the service refused (401), to forget it where it is shared (Coordinate replicas) */
  onInvalidated?: (value: string) => void;
  /** told each token taken into use and each failure */
  metrics?: TokenMetrics;
}

/** Spec §5.5 and §8: a token lives 30 minutes. */
export const SPEC_TOKEN_LIFETIME_MS = 30 * 60 * 1000;
/** An expires_in of 0.001 s must not mean one token request per service request. */
export const MIN_TOKEN_LIFETIME_MS = 10_000;

/**
 * Holds one access token for one set of client credentials.
 *
 * Single flight: however many callers ask at once, one token request is made and
 * all of them share its result, success or failure. After a failure the cache
 * answers with the same error, without asking again, until a back-off has passed
 * (or the server's Retry-After, if longer), so a dead token endpoint sees one
 * request per back-off, not one per message. A service that refuses even fresh
 * tokens counts as such a failure too.
 */
export class TokenCache {
  private token: AccessToken | null = null;
  private pending: Promise<AccessToken> | null = null;
  private lastFailure: { error: Error; until: number } | null = null;
  private failures = 0;
  private closed = false;
  private warnedLifetime = false;
  private readonly opts: Required<Omit<TokenCacheOptions, 'onWarning' | 'onInvalidated'>> & Pick<TokenCacheOptions, 'onWarning' | 'onInvalidated'>;

  constructor(
    private readonly fetchToken: () => Promise<TokenResponse>,
    options: TokenCacheOptions = {},
  ) {
    this.opts = {
      defaultLifetimeMs: options.defaultLifetimeMs ?? SPEC_TOKEN_LIFETIME_MS,
      minLifetimeMs: options.minLifetimeMs ?? MIN_TOKEN_LIFETIME_MS,
      renewMarginMs: options.renewMarginMs ?? 60_000,
      failureBackoffMs: options.failureBackoffMs ?? 1_000,
      maxFailureBackoffMs: options.maxFailureBackoffMs ?? 30_000,
      now: options.now ?? monotonicNow,
      onWarning: options.onWarning,
      onInvalidated: options.onInvalidated,
      metrics: options.metrics ?? NO_CLIENT_METRICS,
    };
  }

  /**
   * The current token if it can be used now, without waiting: the common case,
   * answered synchronously. Past renewAt it also starts a renewal in the
   * background, so neither a slow nor a failing token endpoint holds up
   * requests while the current token is good. Null: call get() and wait.
   */
  peek(): AccessToken | null {
    if (this.closed) return null;
    const token = this.token;
    if (!token) return null;
    const now = this.opts.now();
    if (now < token.renewAt) return token;
    if (now >= token.usableUntil) return null;
    if (!this.pending && !this.inBackoff(now)) {
      this.pending = this.fetch();
      // The renewal's failure is kept in lastFailure; the callers of this round use the current token.
      this.pending.catch(() => undefined);
    }
    return token;
  }

  /** A valid token: the cached one, the flight in progress, or a new flight. */
  get(): Promise<AccessToken> {
    if (this.closed) return Promise.reject(closedError('configuration'));
    const token = this.peek();
    if (token) return Promise.resolve(token);
    if (this.pending) return this.pending;
    if (this.lastFailure && this.inBackoff(this.opts.now())) return Promise.reject(this.lastFailure.error);
    this.pending = this.fetch();
    return this.pending;
  }

  /**
   * Forget a token the service refused (401). Only the token that was refused is
   * dropped: if another caller already replaced it, the newer one stays.
   */
  invalidate(value: string): void {
    if (this.token && this.token.value === value) this.token = null;
    this.opts.onInvalidated?.(value);
  }

  /**
   * The service refused a token we had just fetched for it: another one will not
   * do better for now. Drop it and back off as after a failed token request, so
   * that a hundred messages do not fetch a hundred tokens.
   */
  refusedByService(value: string, error: ChargingError): void {
    this.invalidate(value);
    this.recordFailure(
      new ChargingError('AUTH', `The service refuses freshly issued tokens (${error.statusCode ?? 401}); no new token is requested for a while. Check the client's scopes and that the token URL belongs to this service.`, {
        statusCode: error.statusCode,
        serviceMessage: error.serviceMessage,
      }),
    );
  }

  close(): void {
    this.closed = true;
    this.token = null;
  }

  private inBackoff(now: number): boolean {
    return this.lastFailure !== null && now < this.lastFailure.until;
  }

  private recordFailure(error: Error): void {
    this.opts.metrics.failed(error instanceof ChargingError ? error.code : 'INTERNAL');
    this.failures++;
    const backoff = Math.min(this.opts.maxFailureBackoffMs, this.opts.failureBackoffMs * 2 ** (this.failures - 1));
    // A server that says how long to stay away is believed (RFC 9110 §10.2.3), within the cap.
    const retryAfter = error instanceof ChargingError && error.retryAfterMs !== undefined ? Math.min(error.retryAfterMs, this.opts.maxFailureBackoffMs * 10) : 0;
    this.lastFailure = { error, until: this.opts.now() + Math.max(backoff, retryAfter) };
  }

  private lifetimeMs(expiresIn: number | undefined): number {
    if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn) || expiresIn <= 0) return this.opts.defaultLifetimeMs;
    const ms = expiresIn * 1000;
    if (ms >= this.opts.minLifetimeMs) return ms;
    if (!this.warnedLifetime) {
      this.warnedLifetime = true;
      this.opts.onWarning?.(
        `The token endpoint issued a token valid for ${expiresIn} s; it is used for ${this.opts.minLifetimeMs / 1000} s (the shortest lifetime believed), so that not every request needs a new token. A 401 still gets a new token at once.`,
      );
    }
    return this.opts.minLifetimeMs;
  }

  private async fetch(): Promise<AccessToken> {
    try {
      const res = await this.fetchToken();
      const issuedAt = this.opts.now();
      const lifetimeMs = this.lifetimeMs(res.expiresIn);
      const margin = Math.min(this.opts.renewMarginMs, lifetimeMs / 10);
      const safety = Math.min(5_000, lifetimeMs / 20);
      const token: AccessToken = {
        value: res.accessToken,
        expiresAt: issuedAt + lifetimeMs,
        renewAt: issuedAt + lifetimeMs - margin,
        usableUntil: issuedAt + lifetimeMs - safety,
      };
      this.failures = 0;
      this.lastFailure = null;
      if (!this.closed) this.token = token;
      this.opts.metrics.renewed();
      return token;
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      this.recordFailure(error);
      throw error;
    } finally {
      this.pending = null;
    }
  }
}
