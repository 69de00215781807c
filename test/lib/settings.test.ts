import assert from 'node:assert/strict';
import { chargingSessionSettings, checkEndpointUrl, isLoopback, positiveNumber, waitTimeoutMs } from '../../nodes/lib/settings';
import { ChargingError } from '../../nodes/lib/errors';

describe('settings: endpoint URLs and numbers from the config dialog (no Node-RED)', () => {
  it('accepts https anywhere, http only for this machine unless allowed (with a warning)', () => {
    assert.deepEqual(checkEndpointUrl('Base URL', 'https://a.example', false), { url: 'https://a.example' });
    for (const h of ['http://127.0.0.1:1880', 'http://localhost', 'http://[::1]:8080', 'http://sim.localhost:18080']) assert.equal(checkEndpointUrl('Base URL', h, false).warning, undefined);
    assert.throws(() => checkEndpointUrl('Base URL', 'http://a.example', false), (e: ChargingError) => e.code === 'CONFIG' && /plain http/.test(e.message));
    assert.match(String(checkEndpointUrl('Base URL', 'http://a.example', true).warning), /unencrypted/);
    assert.throws(() => checkEndpointUrl('Token URL', 'https://user:pw@a.example', false), /must not contain a user name or password/);
    assert.throws(() => checkEndpointUrl('Token URL', 'ftp://a.example', false), /must start with https/);
    assert.throws(() => checkEndpointUrl('Token URL', '', false), /is not set/);
  });

  it('knows loopback hosts: localhost, *.localhost, 127.0.0.0/8 and ::1, nothing else', () => {
    for (const h of ['localhost', 'LOCALHOST', 'a.localhost', '127.0.0.1', '127.3.2.1', '::1', '[::1]']) assert.equal(isLoopback(h), true, h);
    for (const h of ['128.0.0.1', 'localhost.example.com', '10.0.0.1', 'example.com', '127.0.0.1.nip.io']) assert.equal(isLoopback(h), false, h);
  });

  it('reads a number from a field within bounds, with a default for anything unreadable', () => {
    assert.equal(positiveNumber('12', 10, 1, 300), 12);
    assert.equal(positiveNumber(1000, 10, 1, 300), 300);
    assert.equal(positiveNumber('0', 10, 1, 300), 1);
    assert.equal(positiveNumber('soon', 10, 1, 300), 10);
    assert.equal(positiveNumber(undefined, 10, 1, 300), 10);
  });

  it('the wait timeout of charging-start and charging-stop: 1 s to 1 h in ms, 60 s when empty or unreadable', () => {
    assert.equal(waitTimeoutMs('5'), 5000);
    assert.equal(waitTimeoutMs(0.2), 200);
    assert.equal(waitTimeoutMs(0), 100);
    assert.equal(waitTimeoutMs(-5), 100);
    assert.equal(waitTimeoutMs(99999), 3_600_000);
    assert.equal(waitTimeoutMs(''), 60_000);
    assert.equal(waitTimeoutMs('soon'), 60_000);
    assert.equal(waitTimeoutMs(undefined), 60_000);
  });

  it('settings.js chargingSession, read once and typed: a wrong poll floor is the default 5 s, a wrong type or a lease under 50 ms is left undefined', () => {
    assert.deepEqual(chargingSessionSettings(undefined), { minPollIntervalSec: 5, fleet: { cycleMs: undefined, leaseMs: undefined } });
    assert.deepEqual(chargingSessionSettings({ chargingSession: { minPollIntervalSec: 0.5, fleet: { cycleMs: 200, leaseMs: 1500 } } }), {
      minPollIntervalSec: 0.5,
      fleet: { cycleMs: 200, leaseMs: 1500 },
    });
    assert.deepEqual(chargingSessionSettings({ chargingSession: { minPollIntervalSec: '2', fleet: { cycleMs: 10, leaseMs: Infinity } } }), {
      minPollIntervalSec: 5,
      fleet: { cycleMs: undefined, leaseMs: undefined },
    });
  });
});
