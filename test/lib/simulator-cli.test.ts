import assert from 'node:assert/strict';
import { parseArgs, parseFault } from '../../simulator/cli';

describe('simulator command line', () => {
  it('parses fault specs', () => {
    assert.deepEqual(parseFault('get:status:503:3'), { target: 'get', kind: 'status', status: 503, times: 3 });
    assert.deepEqual(parseFault('token:latency:2000'), { target: 'token', kind: 'latency', delayMs: 2000, times: Infinity });
    assert.deepEqual(parseFault('post:reset'), { target: 'post', kind: 'reset', times: 1 });
    assert.equal(parseFault('service:hang:0:always').times, Infinity);
    assert.throws(() => parseFault('nowhere:reset'), /bad --fault/);
  });

  it('parses options', () => {
    const { options, faults } = parseArgs(['--port', '0', '--token-lifetime', '60', '--no-expires-in', '--fault', 'get:status:500']);
    assert.equal(options.port, 0);
    assert.equal(options.tokenLifetimeSec, 60);
    assert.equal(options.omitExpiresIn, true);
    assert.equal(faults.length, 1);
    assert.throws(() => parseArgs(['--bogus']), /unknown option --bogus/);
  });
});
