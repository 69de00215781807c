/**
 * Every fault the simulator can inject, against the client's policy (DESIGN §3):
 * GET retried with back-off, START/STOP never repeated once they may have
 * reached the station, token failures named and shared, timeouts everywhere.
 */
import assert from 'node:assert/strict';
import sinon from 'sinon';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator, commandKey, SESSIONS_PATH, TOKEN_PATH } from '../../../simulator/simulator';
import { startSimulator, rejection, freePort, until, driveClock, delay, clientFor } from '../../harness';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

describe('fault handling (client against the simulator)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  const make = (extra: Partial<ServiceClientOptions> = {}) =>
    clientFor(sim, { timeoutMs: 300, retry: { baseDelayMs: 10, maxDelayMs: 40, maxTotalMs: 5_000 }, tokenCache: { failureBackoffMs: 200 }, ...extra });
  /** A session with a transaction, so that a progress query has a record (200) to corrupt. */
  const startedSession = async () => {
    await client.sendCommand(start);
    await until(() => (sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
  };
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

    it('is bounded by the time budget as well as in count (fake clock for the pauses)', async () => {
      await client.close();
      const clock = sinon.useFakeTimers({ now: Date.now(), toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
      try {
        client = make({ timeoutMs: 100, retry: { getAttempts: 100, baseDelayMs: 100, maxDelayMs: 100, maxTotalMs: 600 } });
        sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
        const started = Date.now();
        let err: ChargingError | null = null;
        void rejection(client.getProgress('x')).then((e) => (err = e));
        await driveClock(clock, () => err !== null, 10);
        const e = err as unknown as ChargingError;
        // On a loaded machine the fake clock may pass an attempt's 100 ms while its 503 is on the way: TIMEOUT then.
        assert.ok(e.statusCode === 503 || e.code === 'TIMEOUT', e.message);
        assert.ok(Date.now() - started <= 600, `answered after ${Date.now() - started} ms of the 600 ms budget`);
        // Pauses of 50-100 ms in a 600 ms budget: at most 13 attempts, never the 100 allowed.
        assert.ok(gets() <= 13, `${gets()} attempts`);
        assert.match(e.message, /gave up after \d+ attempts/);
      } finally {
        clock.restore();
      }
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

    it('honours Retry-After on 429: nothing is sent again before it has passed (fake clock)', async () => {
      await client.close();
      const clock = sinon.useFakeTimers({ now: Date.now(), toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
      try {
        client = make();
        sim.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '2' } });
        let answered = false;
        void client.getProgress('nobody').then(() => (answered = true));
        await driveClock(clock, () => answered, 50);
        const [refused, retried] = sim.requests.filter((r) => r.path === SESSIONS_PATH);
        assert.equal(gets(), 2);
        assert.ok(retried.at - refused.at >= 2_000, `sent again after ${retried.at - refused.at} ms`);
      } finally {
        clock.restore();
      }
    });

    it('fails at once with RATE_LIMITED when Retry-After is beyond the time budget', async () => {
      sim.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '120' }, body: '{"message":"slow down"}' });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'RATE_LIMITED');
      assert.match(err.message, /429 Too Many Requests \(Retry-After 120 s\): slow down/);
      assert.equal(gets(), 1);
    });

    it('a cut-short body is retried, then reported as cut, with the status and the size announced', async () => {
      await startedSession();
      sim.inject({ target: 'get', kind: 'cut', times: Infinity });
      const err = await rejection(client.getProgress('RFID-1'));
      assert.equal(err.code, 'NETWORK');
      assert.match(err.message, /progress query: http:\/\/127\.0\.0\.1:\d+ answered 200, but its body was cut short \(\d+ bytes announced\) \(gave up after 4 attempts\)/);
      assert.equal(gets(), 4);
    });

    it('a huge body is refused as BAD_RESPONSE without buffering it all', async () => {
      await client.close();
      client = make({ maxBodyBytes: 64 * 1024 });
      await startedSession();
      sim.inject({ target: 'get', kind: 'huge', hugeBytes: 2 * 1024 * 1024, times: Infinity });
      const err = await rejection(client.getProgress('RFID-1'));
      assert.equal(err.code, 'BAD_RESPONSE');
      assert.match(err.message, /answered 200, but its body was larger than allowed \(65536 bytes\)/);
      assert.equal(gets(), 1, 'not retried');
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
        const err = await rejection(client.sendCommand(start));
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
      const res = await client.sendCommand(start);
      assert.equal(res.statusCode, 202);
      assert.equal(posts(), 2);
      assert.equal(sim.counters.starts, 1);
    });

    it('connection refused: sent again, bounded, then a NETWORK error', async () => {
      await client.close();
      const port = await freePort();
      client = make({ baseUrl: `http://127.0.0.1:${port}` });
      const err = await rejection(client.sendCommand(start));
      assert.equal(err.code, 'NETWORK');
      assert.equal(err.causeCode, 'ECONNREFUSED');
      assert.match(err.message, /^START: connection refused by http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\); nothing was sent \(gave up after 3 attempts\)$/);
    });

    it('STOP after a 502: outcome unknown and the session is still stopping, not stopped twice', async () => {
      await client.sendCommand(start);
      await until(() => (sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
      const tx = (await client.getProgress('RFID-1')).record?.transactionData?.transactionId as string;
      sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
      const err = await rejection(client.sendCommand({ ...start, action: 'STOP', transactionId: tx }));
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
      ['dripping its body', { kind: 'drip', delayMs: 100 }, /token endpoint .* answered 200, but its body did not arrive in full within 300 ms/],
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

    it('an unreachable token endpoint is a NETWORK error naming the connection failure, not the credentials', async () => {
      await client.close();
      client = make({ authUrl: `http://127.0.0.1:${await freePort()}` });
      const err = await rejection(client.getProgress('x'));
      assert.equal(err.code, 'NETWORK');
      assert.equal(err.retryable, true);
      assert.match(err.message, /^Could not get an access token from http:\/\/127\.0\.0\.1:\d+: connection refused by http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)$/);
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
    it('rejects queued work and pending retries at once, sends nothing afterwards, leaves no timer', async () => {
      await client.close();
      client = make({ maxInFlight: 1, retry: { baseDelayMs: 200, maxDelayMs: 200 } });
      await client.getProgress('warm-up');
      const before = timers();
      sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
      const settled: Array<ChargingError | null> = Array.from({ length: 5 }, () => null);
      const pending = Array.from({ length: 5 }, (_, i) => client.getProgress(`T${i}`).catch((e: ChargingError) => (settled[i] = e)));
      await until(() => gets() >= 2, 'a first 503, then a pause before the retry');
      assert.ok(settled.every((e) => e === null), 'all still waiting: one in its pause, four in the queue');
      await client.close();
      const errors = await Promise.all(pending);
      assert.ok(errors.every((e) => e instanceof ChargingError && e.code === 'CLOSED'), errors.map(String).join());
      // A request written just before close may reach the simulator a moment after it: let it land, then count.
      await delay(50);
      const sent = sim.requests.length;
      await delay(400);
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

describe('simulator arrivals: a refusal is known by its status line', () => {
  it('a START refused with 401 whose body is then cut, sent again with a fresh token, is not counted as a duplicate arrival', async () => {
    const sim = await startSimulator();
    const client = clientFor(sim, { timeoutMs: 2000, retry: { baseDelayMs: 10, maxDelayMs: 20 } });
    try {
      await client.getProgress('warm-up');
      sim.revokeAllTokens();
      sim.inject({ target: 'post', kind: 'cut', times: 1 });
      const cmd = { action: 'START' as const, locationId: 'L', evseId: '1', token: 'CUT-401' };
      assert.equal((await client.sendCommand(cmd)).statusCode, 202);
      assert.deepEqual(sim.arrivalAnswers('START', commandKey(cmd)!.key), [401, 202]);
      assert.equal(sim.counters.duplicateStartArrivals, 0);
      assert.equal(sim.counters.starts, 1);
    } finally {
      await client.close();
      await sim.stop();
    }
  });
});
