import assert from 'node:assert/strict';
import { checkEndpointUrl, isLoopback, positiveNumber } from '../../nodes/lib/settings';
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
});
