/**
 * One access token for the fleet (docs/fleet.md, "Token"): a source for
 * TokenCache (client/token-cache.ts), which stays the one cache of each
 * replica. Plug it in by wrapping the cache's fetch function:
 *
 *     new TokenCache(() => fleet.tokens.fetch(fetchToken), …)
 *
 * fetch() answers with the token another replica stored, as long as enough
 * of its life is left that the cache would not renew it at once; its
 * lifetime is the time Redis still keeps it (PTTL), so no replica's wall
 * clock is involved. When there is none, one replica takes a lock
 * (`SET lock NX PX`) and asks the token endpoint; the others wait for the
 * token to appear, with a deadline, then read it: one token request per
 * lifetime for the whole fleet. The client secret never goes to Redis; the
 * access token does, sealed, and Redis should still be private (rediss:// and
 * a password).
 *
 * Redis unreachable, or no token in time: the replica asks the token
 * endpoint itself, as without coordination (`source: 'local'`).
 *
 * The token is stored per account and sealed with the client secret
 * (token-seal.ts), and kept in Redis no longer than its own expiry capped at
 * the spec's 30 minutes: a long expires_in does not leave a usable token in
 * Redis for longer than the service promises it lives.
 */
import { randomBytes } from 'node:crypto';
import type { TokenIdentity } from '../../client/fleet-hooks';
import type { TokenResponse } from '../../client/token-cache';
import { MIN_TOKEN_LIFETIME_MS, SPEC_TOKEN_LIFETIME_MS } from '../../client/token-cache';
import { monotonicNow } from '../../clock';
import type { FleetConnection } from '../redis/connection';
import type { FleetKeys } from '../redis/keys';
import { Backoff, LOOK, sleep } from '../redis/retry';
import { LOCK_RELEASE, TOKEN_DROP, TOKEN_READ, TOKEN_STORE } from './token-scripts';
import { TokenSeal, tokenIdentityDigest } from './token-seal';

export interface SharedTokenOptions {
  /** the cache's renew margin (TokenCache renewMarginMs): a stored token this close to its end is not handed out */
  renewMarginMs?: number;
  /** the cache's shortest lifetime believed (TokenCache minLifetimeMs): a stored token with less left is not handed out */
  minLifetimeMs?: number;
  /** lifetime assumed when the token endpoint sends no expires_in (as TokenCache) */
  defaultLifetimeMs?: number;
  /** longest time one replica may take to get a token; others wait this long (plus a little) before fetching themselves */
  lockMs?: number;
  /** how long a lock SET that went unanswered is read back (Redis reconnecting) before this replica fetches alone (default min(lockMs, 2 s)) */
  readBackMs?: number;
  /** first pause between two looks while waiting (doubles up to 200 ms) */
  pollMs?: number;
  now?: () => number;
}

/** Where a token came from: Redis, this replica's request for the fleet, or this replica alone (Redis away). */
export type TokenSource = 'fleet' | 'fetched' | 'local';

export type SharedTokenResponse = TokenResponse & { source: TokenSource };

export interface TokenStoreContext {
  connection: FleetConnection;
  keys: FleetKeys;
  replicaId: string;
  onWarning?: (text: string) => void;
}

export class SharedTokenStore {
  private readonly renewMarginMs: number;
  private readonly minLifetimeMs: number;
  private readonly defaultLifetimeMs: number;
  private readonly lockMs: number;
  private readonly pollMs: number;
  private readonly now: () => number;
  private readonly seal = new TokenSeal();
  /** per token key: the last token read or stored, and its sealed text (what TOKEN_DROP compares) */
  private readonly seen = new Map<string, { value: string; sealed: string }>();
  /** per lock key: the value of a SET NX whose answer never came (it may hold the lock) */
  private readonly unanswered = new Map<string, string>();
  private readonly readBackMs: number;

  constructor(
    private readonly ctx: TokenStoreContext,
    options: SharedTokenOptions = {},
  ) {
    this.renewMarginMs = options.renewMarginMs ?? 60_000;
    this.minLifetimeMs = options.minLifetimeMs ?? MIN_TOKEN_LIFETIME_MS;
    this.defaultLifetimeMs = options.defaultLifetimeMs ?? SPEC_TOKEN_LIFETIME_MS;
    this.lockMs = options.lockMs ?? 30_000;
    this.pollMs = options.pollMs ?? 25;
    this.readBackMs = options.readBackMs ?? Math.min(this.lockMs, 2_000);
    this.now = options.now ?? monotonicNow;
  }

  /**
   * A token for TokenCache: the fleet's, or one fetched with `fetchLocal` for
   * the fleet (or for this replica alone when Redis is away). A failure of
   * `fetchLocal` is passed on as it is; a failure of Redis never is.
   */
  async fetch(fetchLocal: () => Promise<TokenResponse>, identity: TokenIdentity): Promise<SharedTokenResponse> {
    const conn = this.ctx.connection;
    const at = this.placeOf(identity);
    // An earlier fetch's SET whose answer never came may have landed: its value is tried (and read back) first.
    const lockId = this.unanswered.get(at.lock) ?? `${randomBytes(8).toString('hex')}:${this.ctx.replicaId}`;
    const deadline = this.now() + this.lockMs + 1_000;
    try {
      const backoff = new Backoff({ firstMs: this.pollMs, maxMs: LOOK.maxMs });
      while (!conn.isClosed) {
        const stored = await this.read(at);
        if (stored) return stored;
        if (await this.takeLock(at, lockId)) {
          // Another replica may have stored a token between our look and our lock: look again first.
          const fresh = await this.read(at);
          if (!fresh) return await this.fetchForFleet(fetchLocal, at, lockId);
          await conn.eval(LOCK_RELEASE.call({ lock: at.lock }, { lockId }));
          return fresh;
        }
        if (this.now() >= deadline) break;
        await sleep(Math.min(backoff.next(), Math.max(1, deadline - this.now())));
      }
      if (!conn.isClosed) this.ctx.onWarning?.(`No replica stored a token within ${this.lockMs + 1000} ms; this replica asks the token endpoint itself`);
    } catch (err) {
      if (err instanceof FetchFailure) throw err.failure;
      this.ctx.onWarning?.(`The shared token could not be used (${conn.toError(err, 'token').message}); this replica asks the token endpoint itself`);
    }
    return { ...(await fetchLocal()), source: 'local' };
  }

  /**
   * The service refused this token (401): forget it in Redis too, unless
   * another replica already replaced it. Never throws.
   */
  async invalidate(value: string, identity: TokenIdentity): Promise<void> {
    const at = this.placeOf(identity);
    // Redis holds the sealed text: only a token this replica read or stored can be the one refused.
    const seen = this.seen.get(at.token);
    if (!seen || seen.value !== value) return;
    try {
      await this.ctx.connection.eval(TOKEN_DROP.call({ token: at.token }, { sealed: seen.sealed }));
    } catch {
      // Redis away: the token lapses by itself, and each replica gets a 401 once at most
    }
  }

  /**
   * `SET lock NX PX`, the way a command claim is taken (claims.ts): ioredis does
   * not re-send a command whose answer was lost, but the command may have run.
   * So a SET that was not answered, or refused after such a one, reads the lock
   * back: our own value means we hold it. Without this, a lost reply left the
   * lock held by us while we waited for it, and the fleet's renewal stalled
   * until it lapsed (lockMs). Throws when Redis does not answer within readBackMs.
   */
  private async takeLock(at: TokenPlace, lockId: string): Promise<boolean> {
    const conn = this.ctx.connection;
    let answer: unknown;
    try {
      answer = await conn.run('taking the token lock', (r) => r.set(at.lock, lockId, 'PX', this.lockMs, 'NX'));
    } catch {
      this.unanswered.set(at.lock, lockId);
      return this.ownsLock(at, lockId);
    }
    if (answer === 'OK') {
      this.unanswered.delete(at.lock);
      return true;
    }
    return this.unanswered.get(at.lock) === lockId ? this.ownsLock(at, lockId) : false;
  }

  /** Reads the lock until Redis answers (a reconnect takes a moment), within readBackMs: true when it holds our value. */
  private async ownsLock(at: TokenPlace, lockId: string): Promise<boolean> {
    const until = this.now() + this.readBackMs;
    const backoff = new Backoff({ firstMs: this.pollMs, maxMs: LOOK.maxMs });
    for (;;) {
      try {
        const holder = await this.ctx.connection.run('reading the token lock', (r) => r.get(at.lock));
        // Ours, or nobody's (the earlier SET did not land, or lapsed): nothing of ours is pending any more.
        if (holder === lockId || holder === null) this.unanswered.delete(at.lock);
        return holder === lockId;
      } catch (err) {
        if (this.ctx.connection.isClosed || this.now() >= until) throw err;
      }
      await sleep(Math.min(backoff.next(), Math.max(1, until - this.now())));
    }
  }

  private placeOf(identity: TokenIdentity): TokenPlace {
    const digest = tokenIdentityDigest(identity);
    return { identity, token: this.ctx.keys.token(digest), lock: this.ctx.keys.tokenLock(digest) };
  }

  /** The stored token if it opens with our secret and enough of its life is left (see fetch), else null. */
  private async read(at: TokenPlace): Promise<SharedTokenResponse | null> {
    const res = (await this.ctx.connection.eval(TOKEN_READ.call({ token: at.token }, {}))) as unknown[];
    const [sealed, lifetimeText, leftMs] = res;
    if (typeof sealed !== 'string' || typeof leftMs !== 'number') return null;
    // Sealed with another secret (a replica misconfigured, or a secret rotated): no token, as if Redis held none.
    const value = await this.seal.open(sealed, at.identity, at.token);
    if (value === null) return null;
    this.seen.set(at.token, { value, sealed });
    const lifetimeMs = Number(lifetimeText);
    // The cache renews min(margin, a tenth of the lifetime) before the end: a token inside that window
    // (or just before it) would be renewed at once, so the replica that gets there first fetches a new one.
    const renewWindow = Math.min(this.renewMarginMs, lifetimeMs / 10) + Math.min(1_000, lifetimeMs / 10);
    if (!(leftMs > Math.max(renewWindow, this.minLifetimeMs))) return null;
    // Whoever writes to Redis can stretch the key's TTL, not the token's life: never believed past the spec's 30 min.
    return { accessToken: value, expiresIn: Math.min(leftMs, SPEC_TOKEN_LIFETIME_MS) / 1000, source: 'fleet' };
  }

  /** This replica holds the lock: ask the token endpoint, store the answer, free the lock. */
  private async fetchForFleet(fetchLocal: () => Promise<TokenResponse>, at: TokenPlace, lockId: string): Promise<SharedTokenResponse> {
    let res: TokenResponse;
    try {
      res = await fetchLocal();
    } catch (err) {
      // Free the lock so that another replica (or our next try, after the cache's back-off) may ask.
      await this.ctx.connection.eval(LOCK_RELEASE.call({ lock: at.lock }, { lockId })).catch(() => undefined);
      throw new FetchFailure(err);
    }
    const given = typeof res.expiresIn === 'number' && Number.isFinite(res.expiresIn) && res.expiresIn > 0 ? res.expiresIn * 1000 : this.defaultLifetimeMs;
    const lifetimeMs = Math.min(given, SPEC_TOKEN_LIFETIME_MS);
    try {
      const sealed = await this.seal.seal(res.accessToken, at.identity, at.token);
      const call = TOKEN_STORE.call({ token: at.token, lock: at.lock }, { sealed, lifetimeMs: Math.round(lifetimeMs), keepMs: Math.max(1, Math.round(lifetimeMs)), lockId });
      await this.ctx.connection.eval(call);
      this.seen.set(at.token, { value: res.accessToken, sealed });
    } catch (err) {
      this.ctx.onWarning?.(`The new token could not be shared (${this.ctx.connection.toError(err, 'storing the token').message}); other replicas ask for their own`);
    }
    return { ...res, source: 'fetched' };
  }
}

/** Where one account's token lives in Redis, and what opens it. */
interface TokenPlace {
  identity: TokenIdentity;
  token: string;
  lock: string;
}

/** The token endpoint's own failure, carried through the Redis error handling unchanged. */
class FetchFailure extends Error {
  constructor(readonly failure: unknown) {
    super('token request failed');
  }
}
