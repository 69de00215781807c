import assert from 'node:assert/strict';
import { backoffDelay, parseRetryAfter } from '../../../nodes/lib/client/backoff';

describe('back-off and Retry-After (no Node-RED)', () => {
  it('backs off exponentially with jitter between half and all of the ceiling, capped', () => {
    assert.equal(backoffDelay(1, 100, 5000, () => 0), 50);
    assert.equal(backoffDelay(1, 100, 5000, () => 1), 100);
    assert.equal(backoffDelay(3, 100, 5000, () => 1), 400);
    assert.equal(backoffDelay(20, 100, 5000, () => 1), 5000);
    for (let i = 0; i < 100; i++) {
      const d = backoffDelay(2, 100, 5000);
      assert.ok(d >= 100 && d <= 200, String(d));
    }
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.UTC(2026, 10, 22, 12, 0, 0);
    assert.equal(parseRetryAfter('7', now), 7000);
    assert.equal(parseRetryAfter('Sun, 22 Nov 2026 12:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Sun, 22 Nov 2026 11:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

});
