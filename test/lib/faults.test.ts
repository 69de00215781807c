/**
 * Every fault the simulator can inject, against the client's policy (DESIGN §3):
 * GET retried with back-off, START/STOP never repeated once they may have
 * reached the station, token failures named and shared, timeouts everywhere.
 */
import assert from 'node:assert/strict';
import { ServiceClient, ServiceClientOptions } from '../../nodes/lib/service-client';
import { ChargingError } from '../../nodes/lib/errors';
import { ChargingServiceSimulator, SESSIONS_PATH, TOKEN_PATH } from '../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, startSimulator, rejection, freePort } from '../harness';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

describe('fault handling (client against the simulator)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  const make = (extra: Partial<ServiceClientOptions> = {}) =>
    new ServiceClient({
      baseUrl: sim.baseUrl,
      authUrl: sim.authUrl,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      timeoutMs: 300,
      retry: { baseDelayMs: 10, maxDelayMs: 40, maxTotalMs: 5_000 },
      tokenCache: { failureBackoffMs: 200 },
      ...extra,
    });
  const posts = () => sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).length;
  const gets = () => sim.requests.filter((r) => r.method === 'GET' && r.path === SESSIONS_PATH).length;

  beforeEach(async () => {
    sim = await startSimulator();
    client = make();
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  describe('progress query (GET): retried, bounded', () => {
    for (const status of [500, 502, 503]) {
      it(`retries ${status} (with and without a body) and succeeds`, async () => {
        sim.inject({ target: 'get', kind: 'status', status, times: 1 });
        sim.inject({ target: 'get', kind: 'status', status, body: '{"message":"maintenance"}', times: 1 });
        const res = await client.getProgress('nobody');
        assert.equal(res.record, null);
        assert.equal(gets(), 3);
      });
    }

    it('gives up after the configured attempts with a clear error carrying the status and text', async () => {
      sim.inject({ target: 'get', kind: 'status', status: 503, body: '{"message":"maintenance"}', times: Infinity });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'HTTP');
      assert.equal(err.statusCode, 503);
      assert.match(err.message, /progress query failed: the service answered 503: maintenance \(gave up after 4 attempts\)/);
      assert.equal(gets(), 4);
    });

    it('is bounded in time as well as in count', async () => {
      await client.close();
      client = make({ retry: { getAttempts: 100, baseDelayMs: 100, maxDelayMs: 100, maxTotalMs: 600 } });
      sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
      const t0 = Date.now();
      await rejection(client.getProgress('x'));
      assert.ok(gets() < 100, `${gets()} attempts`);
      assert.ok(Date.now() - t0 < 3_000);
    });

    it('retries a reset connection', async () => {
      sim.inject({ target: 'get', kind: 'reset', times: 2 });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
    });

    it('times out a hung request and retries it', async () => {
      sim.inject({ target: 'get', kind: 'hang', times: 1 });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
      assert.equal(gets(), 2);
    });

    it('a service that always hangs gives a TIMEOUT error naming the limit', async () => {
      sim.inject({ target: 'get', kind: 'hang', times: Infinity });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'TIMEOUT');
      assert.match(err.message, /no answer from http:\/\/127\.0\.0\.1:\d+ within 300 ms/);
    });

    it('honours Retry-After on 429', async () => {
      sim.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '1' } });
      const t0 = Date.now();
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
      assert.ok(Date.now() - t0 >= 950, 'waited for Retry-After');
    });

    it('fails at once with RATE_LIMITED when Retry-After is beyond the time budget', async () => {
      sim.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '120' }, body: '{"message":"slow down"}' });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'RATE_LIMITED');
      assert.match(err.message, /429 Too Many Requests \(Retry-After 120 s\): slow down/);
      assert.equal(gets(), 1);
    });

    it('a cut-short body is retried, then reported', async () => {
      sim.inject({ target: 'get', kind: 'truncated', times: Infinity });
      const err = await rejection(client.getProgress('x'));
      assert.ok(['NETWORK', 'BAD_RESPONSE'].includes(err.code), err.code);
    });

    it('a huge body is refused as BAD_RESPONSE without buffering it all', async () => {
      await client.close();
      client = make({ maxBodyBytes: 64 * 1024 });
      sim.inject({ target: 'get', kind: 'huge', hugeBytes: 2 * 1024 * 1024, times: Infinity });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'BAD_RESPONSE');
      assert.match(err.message, /larger than allowed \(65536 bytes\)/);
    });
  });

  describe('START/STOP (POST): never repeated once they may have reached the station', () => {
    for (const [name, rule] of [
      ['a 500 after processing', { kind: 'status', status: 500 }],
      ['a 503 with no body', { kind: 'status', status: 503 }],
      ['a reset after processing', { kind: 'reset' }],
      ['a hang after processing (timeout)', { kind: 'hang' }],
    ] as const) {
      it(`${name}: OUTCOME_UNKNOWN, sent once, no duplicate`, async () => {
        sim.inject({ target: 'post', afterProcessing: true, ...rule });
        const err = await rejection(client.startSession(start));
        assert.equal(err.code, 'OUTCOME_UNKNOWN');
        assert.match(err.message, /START may or may not have reached the station/);
        assert.match(err.message, /It was not sent again/);
        assert.equal(posts(), 1);
        assert.equal(sim.counters.starts, 1);
        assert.equal(sim.counters.duplicateStarts, 0);
        // The station did act: the session exists, and a progress query tells the user so.
        assert.ok(sim.session('RFID-1'));
      });
    }

    it('429: sent again after Retry-After (surely not processed), once', async () => {
      sim.inject({ target: 'post', kind: 'status', status: 429, headers: { 'Retry-After': '0' } });
      const res = await client.startSession(start);
      assert.equal(res.statusCode, 202);
      assert.equal(posts(), 2);
      assert.equal(sim.counters.starts, 1);
    });

    it('connection refused: sent again, bounded, then a NETWORK error', async () => {
      await client.close();
      const port = await freePort();
      client = make({ baseUrl: `http://127.0.0.1:${port}` });
      const err = await rejection(client.startSession(start));
      assert.equal(err.code, 'NETWORK');
      assert.equal(err.causeCode, 'ECONNREFUSED');
      assert.match(err.message, /could not connect to http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\) \(gave up after 3 attempts\)/);
      assert.equal(client.stats.requests, 3);
    });

    it('STOP after a 502: outcome unknown and the session is still stopping, not stopped twice', async () => {
      await client.startSession(start);
      await new Promise((r) => setTimeout(r, 80));
      const tx = (await client.getProgress('RFID-1')).record?.transactionData?.transactionId as string;
      sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
      const err = await rejection(client.stopSession({ ...start, action: 'STOP', transactionId: tx }));
      assert.equal(err.code, 'OUTCOME_UNKNOWN');
      assert.equal(sim.counters.stops, 1);
      assert.equal(sim.counters.duplicateStops, 0);
    });
  });

  describe('token endpoint failures', () => {
    for (const [name, rule, pattern] of [
      ['down (500)', { kind: 'status', status: 500 }, /Authentication failed: the token endpoint .* answered 500/],
      ['answering 400', { kind: 'status', status: 400, body: '{"error":"invalid_request"}' }, /answered 400 \(invalid_request\)\. Check the client ID/],
      ['answering 401', { kind: 'status', status: 401, body: '{"error":"invalid_client"}' }, /answered 401 \(invalid_client\)/],
      ['answering malformed JSON', { kind: 'malformed' }, /answered 200 with a body that is not JSON/],
      ['resetting the connection', { kind: 'reset' }, /could not get an access token .* connection failed/],
      ['hanging', { kind: 'hang' }, /could not get an access token .* no answer within 300 ms/],
    ] as const) {
      it(`${name}: an AUTH error that names authentication`, async () => {
        sim.inject({ target: 'token', times: Infinity, ...rule });
        const err = await rejection(client.getProgress('x'));
        assert.equal(err.code, 'AUTH');
        assert.match(err.message, pattern);
        assert.equal(gets(), 0, 'no service request without a token');
      });
    }

    it('a single transient token failure (503, reset) is retried inside the flight and absorbed', async () => {
      sim.inject({ target: 'token', kind: 'status', status: 503 });
      sim.inject({ target: 'token', kind: 'reset' });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
      assert.equal(sim.counters.tokenRequests, 3);
    });

    it('refused credentials are not retried: one token request', async () => {
      sim.inject({ target: 'token', kind: 'status', status: 401, body: '{"error":"invalid_client"}', times: Infinity });
      await rejection(client.getProgress('x'));
      assert.equal(sim.counters.tokenRequests, 1);
    });

    it('an unreachable token endpoint is an AUTH error naming the connection failure', async () => {
      await client.close();
      client = make({ authUrl: `http://127.0.0.1:${await freePort()}` });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'AUTH');
      assert.match(err.message, /ECONNREFUSED/);
    });

    it('a slow token endpoint within the timeout still works', async () => {
      sim.inject({ target: 'token', kind: 'latency', delayMs: 150 });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
    });

    it('no request storm: 100 concurrent callers share one bounded token flight; recovery without a restart', async () => {
      sim.inject({ target: 'token', kind: 'status', status: 503, times: Infinity });
      const results = await Promise.allSettled(Array.from({ length: 100 }, () => client.getProgress('x')));
      assert.ok(results.every((r) => r.status === 'rejected'));
      assert.equal(sim.counters.tokenRequests, 3, 'one flight of 3 attempts, not 100');
      // Within the back-off: no new token request.
      await rejection(client.getProgress('x'));
      assert.equal(sim.counters.tokenRequests, 3);
      // The endpoint comes back; after the back-off the next message succeeds.
      sim.clearFaults();
      await new Promise((r) => setTimeout(r, 250));
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
      assert.equal(sim.counters.tokenRequests, 4);
    });

    it('a token response without access_token, or of another type, is refused', async () => {
      sim.inject({ target: 'token', kind: 'status', status: 200, body: '{"token_type":"Bearer"}', times: Infinity });
      assert.match((await rejection(client.getProgress('x'))).message, /without an access_token/);
      await new Promise((r) => setTimeout(r, 250));
      sim.clearFaults();
      sim.inject({ target: 'token', kind: 'status', status: 200, body: '{"access_token":"abcd","token_type":"MAC"}', times: Infinity });
      assert.match((await rejection(client.getProgress('x'))).message, /issued a "MAC" token; only Bearer is supported/);
    });
  });

  describe('close', () => {
    it('rejects queued work, cancels back-off timers and sends nothing afterwards', async () => {
      await client.close();
      client = make({ maxInFlight: 1, retry: { baseDelayMs: 200, maxDelayMs: 200 } });
      sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
      const before = timers();
      const pending = Array.from({ length: 5 }, (_, i) => client.getProgress(`T${i}`).catch((e: ChargingError) => e));
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(timers() > before, 'back-off timers are armed');
      await client.close();
      const errors = await Promise.all(pending);
      assert.ok(errors.every((e) => e instanceof ChargingError && e.code === 'CLOSED'), errors.map(String).join());
      const sent = sim.requests.length;
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(sim.requests.length, sent, 'no request after close');
      assert.ok(timers() <= before, `timers left: ${timers() - before}`);
    });

    it('refuses new work after close', async () => {
      await client.close();
      assert.equal((await rejection(client.getProgress('x'))).code, 'CLOSED');
      assert.equal(sim.requests.filter((r) => r.path === TOKEN_PATH).length, 0);
    });
  });
});

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}
