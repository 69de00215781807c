import assert from 'node:assert/strict';
import sinon from 'sinon';
import { TokenCache, TokenResponse, SPEC_TOKEN_LIFETIME_MS, MIN_TOKEN_LIFETIME_MS } from '../../../nodes/lib/client/token-cache';
import { ChargingError } from '../../../nodes/lib/errors';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('TokenCache (no Node-RED, no HTTP)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: Date.UTC(2026, 10, 22, 12, 0, 0), toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  it('makes one request for many concurrent callers and gives them all the same token', async () => {
    const pending = deferred<TokenResponse>();
    const fetch = sinon.fake(() => pending.promise);
    const cache = new TokenCache(fetch);
    const callers = Array.from({ length: 50 }, () => cache.get());
    pending.resolve({ accessToken: 'tok-1', expiresIn: 1800 });
    const tokens = await Promise.all(callers);
    assert.equal(fetch.callCount, 1);
    assert.deepEqual(new Set(tokens.map((t) => t.value)), new Set(['tok-1']));
  });

  it('reuses the token until shortly before expires_in, then renews it in the background', async () => {
    let n = 0;
    const fetch = sinon.fake(async () => ({ accessToken: `tok-${++n}`, expiresIn: 600 }));
    const cache = new TokenCache(fetch);
    assert.equal((await cache.get()).value, 'tok-1');
    clock.tick(530_000); // 70 s before expiry: margin is 60 s, so reused, no request
    assert.equal((await cache.get()).value, 'tok-1');
    assert.equal(fetch.callCount, 1);
    clock.tick(15_000); // 55 s before expiry: renewal starts; this caller does not wait for it
    assert.equal((await cache.get()).value, 'tok-1');
    assert.equal(fetch.callCount, 2);
    assert.equal((await cache.get()).value, 'tok-2');
    assert.equal(fetch.callCount, 2);
  });

  it('keeps using a still-valid token while renewal fails, and waits for a new one only near expiry', async () => {
    let fail = true;
    let n = 0;
    const fetch = sinon.fake(async () => {
      n++;
      if (n > 1 && fail) throw new Error('token endpoint down');
      return { accessToken: `tok-${n}`, expiresIn: 600 };
    });
    const cache = new TokenCache(fetch, { failureBackoffMs: 1_000 });
    await cache.get();
    clock.tick(545_000); // renewal due
    assert.equal((await cache.get()).value, 'tok-1');
    await Promise.resolve();
    assert.equal(fetch.callCount, 2); // failed in the background
    assert.equal((await cache.get()).value, 'tok-1', 'old token still served during the back-off');
    assert.equal(fetch.callCount, 2);
    clock.tick(50_001); // 4.999 s before expiry: no longer usable (safety 5 s); the back-off is over
    fail = false;
    assert.equal((await cache.get()).value, 'tok-3');
  });

  it("assumes the spec's 30 minutes when the response has no expires_in", async () => {
    const fetch = sinon.fake(async () => ({ accessToken: 'tok' }));
    const cache = new TokenCache(fetch);
    const t = await cache.get();
    assert.equal(t.expiresAt - performance.now(), SPEC_TOKEN_LIFETIME_MS);
    clock.tick(SPEC_TOKEN_LIFETIME_MS - 61_000);
    await cache.get();
    assert.equal(fetch.callCount, 1);
    clock.tick(2_000);
    await cache.get();
    assert.equal(fetch.callCount, 2, 'renewal started 60 s before expiry');
  });

  it('renews a very short-lived token at a tenth of its lifetime before expiry, not 60 s before', async () => {
    const fetch = sinon.fake(async () => ({ accessToken: 'tok', expiresIn: 20 }));
    const cache = new TokenCache(fetch);
    const t = await cache.get();
    assert.equal(t.renewAt - performance.now(), 18_000);
    assert.equal(t.usableUntil - performance.now(), 19_000);
    clock.tick(17_900);
    await cache.get();
    assert.equal(fetch.callCount, 1);
    clock.tick(200);
    await cache.get();
    assert.equal(fetch.callCount, 2);
  });

  it('puts a floor under absurd lifetimes (expires_in 0.001 s) and says so once, instead of one token per request', async () => {
    const warnings: string[] = [];
    const fetch = sinon.fake(async () => ({ accessToken: 'tok', expiresIn: 0.001 }));
    const cache = new TokenCache(fetch, { onWarning: (w) => warnings.push(w) });
    const t = await cache.get();
    assert.equal(t.expiresAt - performance.now(), MIN_TOKEN_LIFETIME_MS);
    for (let i = 0; i < 100; i++) await cache.get();
    assert.equal(fetch.callCount, 1);
    clock.tick(MIN_TOKEN_LIFETIME_MS);
    await cache.get();
    assert.equal(fetch.callCount, 2);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /valid for 0\.001 s; it is used for 10 s/);
  });

  it('answers synchronously with peek() while the token is good, and null when a wait is needed', async () => {
    const fetch = sinon.fake(async () => ({ accessToken: 'tok', expiresIn: 600 }));
    const cache = new TokenCache(fetch);
    assert.equal(cache.peek(), null, 'nothing cached yet');
    await cache.get();
    assert.equal(cache.peek()?.value, 'tok');
    clock.tick(600_000);
    assert.equal(cache.peek(), null, 'expired');
  });

  it("stays away for the server's Retry-After when it is longer than the back-off", async () => {
    let fail = true;
    const fetch = sinon.fake(async () => {
      if (fail) throw new ChargingError('AUTH', 'Authentication failed: 429', { statusCode: 429, retryable: true, retryAfterMs: 10_000 });
      return { accessToken: 'tok', expiresIn: 1800 };
    });
    const cache = new TokenCache(fetch, { failureBackoffMs: 1_000 });
    await assert.rejects(cache.get());
    fail = false;
    clock.tick(9_000);
    await assert.rejects(cache.get(), /429/);
    assert.equal(fetch.callCount, 1, 'no request during the 10 s the server asked for');
    clock.tick(1_001);
    assert.equal((await cache.get()).value, 'tok');
    assert.equal(fetch.callCount, 2);
  });

  it('after the service refused a fresh token, backs off instead of fetching a token per message', async () => {
    let n = 0;
    const fetch = sinon.fake(async () => ({ accessToken: `tok-${++n}`, expiresIn: 1800 }));
    const cache = new TokenCache(fetch, { failureBackoffMs: 1_000 });
    const t = await cache.get();
    cache.refusedByService(t.value, new ChargingError('AUTH', 'refused', { statusCode: 401 }));
    for (let i = 0; i < 100; i++) await assert.rejects(cache.get(), (e: ChargingError) => e.code === 'AUTH' && /refuses freshly issued tokens/.test(e.message));
    assert.equal(fetch.callCount, 1);
    clock.tick(1_001);
    assert.equal((await cache.get()).value, 'tok-2');
  });

  it('shares one failure among concurrent callers and backs off before asking again', async () => {
    let fail = true;
    const fetch = sinon.fake(async () => {
      if (fail) throw new Error('token endpoint down');
      return { accessToken: 'tok', expiresIn: 1800 };
    });
    const cache = new TokenCache(fetch, { failureBackoffMs: 1_000 });
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => cache.get()));
    assert.ok(results.every((r) => r.status === 'rejected'));
    assert.equal(fetch.callCount, 1);
    // Within the back-off: the same error, no new request.
    await assert.rejects(cache.get(), /token endpoint down/);
    assert.equal(fetch.callCount, 1);
    // The endpoint comes back; after the back-off the cache recovers by itself.
    fail = false;
    clock.tick(1_001);
    assert.equal((await cache.get()).value, 'tok');
    assert.equal(fetch.callCount, 2);
  });

  it('doubles the back-off after consecutive failures, up to the cap', async () => {
    const fetch = sinon.fake(async () => {
      throw new Error('down');
    });
    const cache = new TokenCache(fetch, { failureBackoffMs: 1_000, maxFailureBackoffMs: 3_000 });
    await assert.rejects(cache.get());
    clock.tick(1_001);
    await assert.rejects(cache.get());
    assert.equal(fetch.callCount, 2);
    clock.tick(1_500); // second back-off is 2 s
    await assert.rejects(cache.get());
    assert.equal(fetch.callCount, 2);
    clock.tick(600);
    await assert.rejects(cache.get());
    assert.equal(fetch.callCount, 3);
    clock.tick(3_001); // capped at 3 s, not 4 s
    await assert.rejects(cache.get());
    assert.equal(fetch.callCount, 4);
  });

  it('invalidate drops only the token that was refused', async () => {
    let n = 0;
    const fetch = sinon.fake(async () => ({ accessToken: `tok-${++n}`, expiresIn: 1800 }));
    const cache = new TokenCache(fetch);
    await cache.get();
    cache.invalidate('tok-0'); // an older token: ignored
    assert.equal((await cache.get()).value, 'tok-1');
    cache.invalidate('tok-1');
    assert.equal((await cache.get()).value, 'tok-2');
  });

  it('refuses after close', async () => {
    const cache = new TokenCache(async () => ({ accessToken: 'tok' }));
    cache.close();
    await assert.rejects(cache.get(), (e: Error & { code?: string }) => e.code === 'CLOSED');
  });
});
