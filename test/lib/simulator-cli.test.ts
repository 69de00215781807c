import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { parseArgs, parseFault } from '../../simulator/cli';
import { startSimulator } from '../harness';

const DIST = path.join(__dirname, '..', '..');

describe('simulator command line', () => {
  it('parses fault specs', () => {
    assert.deepEqual(parseFault('get:status:503:3'), { target: 'get', kind: 'status', status: 503, times: 3 });
    assert.deepEqual(parseFault('token:latency:2000'), { target: 'token', kind: 'latency', delayMs: 2000, times: Infinity });
    assert.deepEqual(parseFault('post:reset'), { target: 'post', kind: 'reset', times: 1 });
    assert.equal(parseFault('service:hang:0:always').times, Infinity);
    assert.throws(() => parseFault('nowhere:reset'), /bad --fault/);
  });

  it('parses the faults of real servers and gateways, target optional', () => {
    assert.deepEqual(parseFault('close-after-answer'), { target: 'any', kind: 'close-after-answer', times: Infinity });
    assert.deepEqual(parseFault('token:close-after-answer:2'), { target: 'token', kind: 'close-after-answer', times: 2 });
    assert.deepEqual(parseFault('idle-close:1000'), { target: 'any', kind: 'idle-close', delayMs: 1000, times: Infinity });
    assert.deepEqual(parseFault('route-404'), { target: 'any', kind: 'route-404', times: Infinity });
    assert.deepEqual(parseFault('get:route-404:html:3'), { target: 'get', kind: 'route-404', format: 'html', times: 3 });
    assert.deepEqual(parseFault('ignore-stop:2'), { target: 'post', kind: 'ignore-stop', times: 2 });
    assert.deepEqual(parseFault('ignore-start:3'), { target: 'post', kind: 'ignore-start', times: 3 });
    assert.deepEqual(parseFault('post:ignore-start'), { target: 'post', kind: 'ignore-start', times: 1 });
    assert.throws(() => parseFault('idle-close'), /idle-close needs a time in ms/);
    assert.throws(() => parseFault('ignore-stop:x'), /x is not a count/);
    assert.throws(() => parseFault('nowhere:close-after-answer'), /bad --fault/);
  });

  it('parses TLS options: files read, both halves required', () => {
    const cert = path.join(DIST, '..', 'test', 'fixtures', 'sim-cert.pem');
    const key = path.join(DIST, '..', 'test', 'fixtures', 'sim-key.pem');
    const { options } = parseArgs(['--tls-cert', cert, '--tls-key', key, '--tls-ca', cert, '--tls-require-client-cert', '--idle-close', '500']);
    assert.match(String(options.tls?.cert), /BEGIN CERTIFICATE/);
    assert.match(String(options.tls?.key), /PRIVATE KEY/);
    assert.equal(options.tls?.requestCert, true);
    assert.throws(() => parseArgs(['--tls-cert', cert]), /needs both --tls-cert and --tls-key/);
    assert.deepEqual(parseArgs(['--idle-close', '500']).faults, [{ target: 'any', kind: 'idle-close', delayMs: 500, times: Infinity }]);
  });

  it('parses options', () => {
    const { options, faults } = parseArgs(['--port', '0', '--token-lifetime', '60', '--no-expires-in', '--fault', 'get:status:500']);
    assert.equal(options.port, 0);
    assert.equal(options.tokenLifetimeSec, 60);
    assert.equal(options.omitExpiresIn, true);
    assert.equal(faults.length, 1);
    assert.throws(() => parseArgs(['--bogus']), /unknown option --bogus/);
  });

  it('a port already in use (npm start running): one clear line and exit 1, no stack trace', async () => {
    const running = await startSimulator();
    try {
      const port = new URL(running.baseUrl).port;
      const res = spawnSync(process.execPath, [path.join(DIST, 'simulator', 'cli.js'), '--port', port], { encoding: 'utf8', timeout: 15_000 });
      assert.equal(res.status, 1);
      assert.match(res.stderr, new RegExp(`^Could not listen on 127\\.0\\.0\\.1:${port} \\(.*EADDRINUSE.*\\)\\. Is npm start running\\?.*npm start -- --fault`));
      assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      await running.stop();
    }
  });

  it('npm start takes the simulator options after --, and says how when one is wrong', () => {
    const res = spawnSync(process.execPath, [path.join(DIST, 'scripts', 'start.js'), '--fault', 'nowhere:reset'], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, SIM_PORT: '0', PORT: '0' } });
    assert.equal(res.status, 2);
    assert.match(res.stderr, /^bad --fault nowhere:reset\n\nnpm start -- \[--reset\] \[--replicas N \[--sentinel\]\] \[simulator options\]/);
    assert.match(res.stderr, /--fault SPEC/);
  });
});
