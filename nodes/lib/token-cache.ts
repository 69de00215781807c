import { ChargingError } from './errors';

/** An access token as the cache keeps it. The value never leaves the client. */
export interface AccessToken {
  value: string;
  /** epoch ms at which the token server says it expires */
  expiresAt: number;
  /** epoch ms from which we ask for a new one (in the background) */
  renewAt: number;
  /** epoch ms after which we no longer send it: a little before expiresAt, for clock skew and latency */
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
  /** renew this long before expiry, or a tenth of very short lifetimes */
  renewMarginMs?: number;
  /** first pause after a failed token request; doubles up to maxFailureBackoffMs */
  failureBackoffMs?: number;
  maxFailureBackoffMs?: number;
  now?: () => number;
}

/** Spec §5.5 and §8: a token lives 30 minutes. */
export const SPEC_TOKEN_LIFETIME_MS = 30 * 60 * 1000;

/**
 * Holds one access token for one set of client credentials.
 *
 * Single flight: however many callers ask at once, one token request is made and
 * all of them share its result, success or failure. After a failure the cache
 * answers with the same error, without asking again, until a back-off has passed,
 * so a dead token endpoint sees one request per back-off, not one per message.
 */
export class TokenCache {
  private token: AccessToken | null = null;
  private pending: Promise<AccessToken> | null = null;
  private lastFailure: { error: Error; until: number } | null = null;
  private failures = 0;
  private closed = false;
  private readonly opts: Required<TokenCacheOptions>;

  constructor(
    private readonly fetchToken: () => Promise<TokenResponse>,
    options: TokenCacheOptions = {},
  ) {
    this.opts = {
      defaultLifetimeMs: options.defaultLifetimeMs ?? SPEC_TOKEN_LIFETIME_MS,
      renewMarginMs: options.renewMarginMs ?? 60_000,
      failureBackoffMs: options.failureBackoffMs ?? 1_000,
      maxFailureBackoffMs: options.maxFailureBackoffMs ?? 30_000,
      now: options.now ?? Date.now,
    };
  }

  /**
   * A valid token. Before renewAt: the cached one. Between renewAt and shortly
   * before expiry: still the cached one, while a renewal runs in the background,
   * so that neither a slow nor a failing token endpoint holds up requests as long
   * as the current token is good. After that, or with no token: wait for a new one.
   */
  get(): Promise<AccessToken> {
    if (this.closed) return Promise.reject(new ChargingError('CLOSED', 'The service configuration was closed'));
    const now = this.opts.now();
    const token = this.token;
    if (token && now < token.renewAt) return Promise.resolve(token);
    if (token && now < token.usableUntil) {
      if (!this.pending && !this.inBackoff(now)) {
        this.pending = this.fetch();
        // The renewal's failure is kept in lastFailure; the callers of this round use the current token.
        this.pending.catch(() => undefined);
      }
      return Promise.resolve(token);
    }
    if (this.pending) return this.pending;
    if (this.lastFailure && this.inBackoff(now)) return Promise.reject(this.lastFailure.error);
    this.pending = this.fetch();
    return this.pending;
  }

  private inBackoff(now: number): boolean {
    return this.lastFailure !== null && now < this.lastFailure.until;
  }

  /**
   * Forget a token the service refused (401). Only the token that was refused is
   * dropped: if another caller already replaced it, the newer one stays.
   */
  invalidate(value: string): void {
    if (this.token && this.token.value === value) this.token = null;
  }

  close(): void {
    this.closed = true;
    this.token = null;
  }

  private async fetch(): Promise<AccessToken> {
    try {
      const res = await this.fetchToken();
      const issuedAt = this.opts.now();
      const lifetimeMs =
        typeof res.expiresIn === 'number' && Number.isFinite(res.expiresIn) && res.expiresIn > 0
          ? res.expiresIn * 1000
          : this.opts.defaultLifetimeMs;
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
      return token;
    } catch (err) {
      this.failures++;
      const backoff = Math.min(
        this.opts.maxFailureBackoffMs,
        this.opts.failureBackoffMs * 2 ** (this.failures - 1),
      );
      const error = err instanceof Error ? err : new Error(String(err));
      this.lastFailure = { error, until: this.opts.now() + backoff };
      throw error;
    } finally {
      this.pending = null;
    }
  }
}
