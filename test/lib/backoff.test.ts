import assert from 'node:assert/strict';
import { backoffDelay, parseRetryAfter } from '../../nodes/lib/backoff';
import { checkEndpointUrl, isLoopback } from '../../nodes/lib/config';
import { ChargingError } from '../../nodes/lib/errors';

describe('back-off, Retry-After and endpoint checks (no Node-RED)', () => {
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

  it('accepts https anywhere, http only for this machine unless allowed (with a warning)', () => {
    assert.deepEqual(checkEndpointUrl('Base URL', 'https://a.example', false), { url: 'https://a.example' });
    for (const h of ['http://127.0.0.1:1880', 'http://localhost', 'http://[::1]:8080']) assert.equal(checkEndpointUrl('Base URL', h, false).warning, undefined);
    assert.throws(() => checkEndpointUrl('Base URL', 'http://a.example', false), (e: ChargingError) => e.code === 'CONFIG' && /plain http/.test(e.message));
    assert.match(String(checkEndpointUrl('Base URL', 'http://a.example', true).warning), /unencrypted/);
    assert.throws(() => checkEndpointUrl('Token URL', 'https://user:pw@a.example', false), /must not contain a user name or password/);
    assert.throws(() => checkEndpointUrl('Token URL', 'ftp://a.example', false), /must start with https/);
    assert.throws(() => checkEndpointUrl('Token URL', '', false), /is not set/);
    assert.equal(isLoopback('127.3.2.1'), true);
    assert.equal(isLoopback('128.0.0.1'), false);
  });
});
