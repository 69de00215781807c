/**
 * Hostile networks and payloads (issue: "every message answered within its
 * deadline, nothing leaked, never a crash"), against the client and the
 * simulator's faults: servers that drip their body, nest JSON thousands deep,
 * cut or inflate an accepted answer, echo our Authorization header, refuse
 * every token, or ask for silence.
 */
import assert from 'node:assert/strict';
import sinon from 'sinon';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { basicCredentials } from '../../../nodes/lib/client/token-endpoint';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator, SESSIONS_PATH, TOKEN_PATH } from '../../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, startSimulator, rejection, until, driveClock, clientFor } from '../../harness';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

/** Fails if any 6-character piece of `secret` shows in `text`: a secret cut in half still leaks. */
export function assertNoPart(text: string, secret: string, where: string): void {
  for (let i = 0; i + 6 <= secret.length; i++) {
    const piece = secret.slice(i, i + 6);
    if (text.includes(piece)) throw new Error(`a part of a secret ("${piece}…") appeared in ${where}`);
  }
}

describe('hostile networks and payloads (client against the simulator)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  let clock: sinon.SinonFakeTimers | null = null;
  const make = (extra: Partial<ServiceClientOptions> = {}) => clientFor(sim, { timeoutMs: 1_000, retry: { baseDelayMs: 10, maxDelayMs: 40, maxTotalMs: 5_000 }, ...extra });
  const gets = () => sim.requests.filter((r) => r.method === 'GET' && r.path === SESSIONS_PATH).length;
  const tokenRequests = () => sim.requests.filter((r) => r.path === TOKEN_PATH).length;
  const fakeClock = () => (clock = sinon.useFakeTimers({ now: Date.now(), toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] }));
  /** Runs `p` to its end on the fake clock, in steps; resolves with its value or its error, and the fake ms it took. */
  async function onClock<T>(p: Promise<T>, stepMs = 50): Promise<{ value?: T; error?: ChargingError; ms: number }> {
    const t0 = Date.now();
    let out: { value?: T; error?: ChargingError } | null = null;
    p.then(
      (value) => (out = { value }),
      (error: ChargingError) => (out = { error }),
    );
    await driveClock(clock!, () => out !== null, stepMs);
    return { ...(out as unknown as { value?: T; error?: ChargingError }), ms: Date.now() - t0 };
  }
  const startedSession = async () => {
    await client.sendCommand(start);
    await until(() => (sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
  };

  beforeEach(async () => {
    sim = await startSimulator();
  });
  afterEach(async () => {
    clock?.restore();
    clock = null;
    await client?.close();
    await sim.stop();
  });

  describe('1. slow bodies: the timeout bounds headers and body; the budget bounds the message', () => {
    it('a progress record dripping one byte every 400 ms is cut at the 1 s timeout: TIMEOUT, on the fake clock', async () => {
      client = make({ retry: { getAttempts: 1 } });
      await startedSession();
      await client.close();
      fakeClock();
      client = make({ retry: { getAttempts: 1 } });
      sim.inject({ target: 'get', kind: 'drip', delayMs: 400, times: Infinity });
      const { error, ms } = await onClock(client.getProgress('RFID-1'));
      assert.equal(error?.code, 'TIMEOUT');
      assert.match(error!.message, /progress query: http:\/\/127\.0\.0\.1:\d+ answered 200, but its body did not arrive in full within 1000 ms/);
      assert.ok(ms <= 1_000 + 50, `answered after ${ms} ms`);
    });

    it('dripping answers do not hold the slots: with Max in flight 2, a third query is answered once they are cut', async () => {
      client = make({ maxInFlight: 2, retry: { getAttempts: 1 } });
      await startedSession();
      sim.inject({ target: 'get', kind: 'drip', delayMs: 400, times: 2 });
      const results = await Promise.allSettled([client.getProgress('RFID-1'), client.getProgress('RFID-1'), client.getProgress('RFID-1')]);
      assert.deepEqual(
        results.map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as ChargingError).code)),
        ['TIMEOUT', 'TIMEOUT', 'ok'],
      );
    });

    it('the message budget is enforced during an attempt, not only between attempts', async () => {
      fakeClock();
      client = make({ timeoutMs: 1_000, retry: { getAttempts: 10, baseDelayMs: 10, maxDelayMs: 10, maxTotalMs: 1_500 } });
      sim.inject({ target: 'get', kind: 'hang', times: Infinity });
      const { error, ms } = await onClock(client.getProgress('nobody'));
      assert.equal(error?.code, 'TIMEOUT');
      assert.ok(ms <= 1_500 + 50, `answered after ${ms} ms of a 1500 ms budget`);
      assert.equal(gets(), 2, 'the second attempt was cut at the end of the budget');
    });

    it('a START whose 202 drips its body is accepted once, with a note: the station got it', async () => {
      client = make();
      sim.inject({ target: 'post', kind: 'drip', delayMs: 400 });
      const res = await client.sendCommand(start);
      assert.equal(res.statusCode, 202);
      assert.equal(res.body, null);
      assert.match(String(res.bodyNote), /The service accepted START \(202\), but its body did not arrive in full within 1000 ms: the command reached the station/);
      assert.equal(sim.counters.starts, 1);
      assert.ok(sim.session('RFID-1'));
    });

    it('a START hanging before any answer is OUTCOME_UNKNOWN at the timeout, never sent twice', async () => {
      fakeClock();
      client = make();
      sim.inject({ target: 'post', kind: 'hang', afterProcessing: true });
      const { error, ms } = await onClock(client.sendCommand(start));
      assert.equal(error?.code, 'OUTCOME_UNKNOWN');
      assert.ok(ms <= 1_000 + 50, `answered after ${ms} ms`);
      assert.equal(sim.counters.starts, 1);
    });

    it('a dripping token endpoint fails the shared flight at its deadline; a later message starts a new flight', async () => {
      fakeClock();
      client = make({ retry: { tokenAttempts: 1 }, tokenCache: { failureBackoffMs: 100 } });
      sim.inject({ target: 'token', kind: 'drip', delayMs: 400 });
      const waiting = [client.getProgress('a'), client.getProgress('b'), client.getProgress('c')];
      const results = await onClock(Promise.allSettled(waiting));
      const errors = results.value!.map((r) => (r.status === 'rejected' ? (r.reason as ChargingError) : null));
      assert.ok(errors.every((e) => e?.code === 'AUTH' && /did not arrive in full within 1000 ms/.test(e.message)), errors.map(String).join('\n'));
      assert.ok(results.ms <= 1_000 + 50, `answered after ${results.ms} ms`);
      assert.equal(tokenRequests(), 1, 'one flight for three messages');
      await clock!.tickAsync(150);
      const next = await onClock(client.getProgress('nobody'));
      assert.equal(next.value?.record, null);
      assert.equal(tokenRequests(), 2);
    });
  });

  describe('2. deep JSON', () => {
    it('a progress record nested 5000 levels is refused as BAD_RESPONSE before it reaches anyone', async () => {
      client = make();
      await startedSession();
      sim.inject({ target: 'get', kind: 'deep', depth: 5000 });
      const err = await rejection(client.getProgress('RFID-1'));
      assert.equal(err.code, 'BAD_RESPONSE');
      assert.match(err.message, /nested deeper than 64 levels/);
    });

    it('a record 60 levels deep (within the limit) is passed on', async () => {
      client = make();
      await startedSession();
      sim.inject({ target: 'get', kind: 'deep', depth: 60 });
      const { record } = await client.getProgress('RFID-1');
      assert.equal(record?.tokenId, 'RFID-1');
      assert.ok(record?.extra);
    });
  });

  describe('3. accepted but unreadable START/STOP: never a plain failure that invites a resend', () => {
    for (const [name, rule, note] of [
      ['cut short', { kind: 'cut' }, /but its body was cut short \(\d+ bytes announced\): the command reached the station/],
      ['larger than the limit', { kind: 'huge', hugeBytes: 2 * 1024 * 1024 }, /but its body was larger than allowed \(65536 bytes\): the command reached the station/],
      ['not JSON', { kind: 'malformed' }, /accepted START \(202\); the service answered 202 with a body that is not valid JSON/],
      ['nested 5000 deep', { kind: 'deep' }, /accepted START \(202\); the service answered 202 with JSON nested deeper than 64 levels/],
    ] as const) {
      it(`a 202 whose body is ${name}: accepted, with a note saying what happened, sent once`, async () => {
        client = make({ maxBodyBytes: 64 * 1024 });
        sim.inject({ target: 'post', ...rule });
        const res = await client.sendCommand(start);
        assert.equal(res.statusCode, 202);
        assert.equal(res.body, null);
        assert.match(String(res.bodyNote), note);
        assert.equal(sim.counters.starts, 1);
        assert.equal(sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).length, 1);
      });
    }
  });

  describe('4. redaction before any cut, in every form a secret can take', () => {
    it('a secret, a token and the Basic value straddling the 300-character cut leave no part behind', async () => {
      client = make();
      await client.getProgress('warm-up');
      const token = String(sim.requests.find((r) => r.path === SESSIONS_PATH)?.headers.authorization).replace('Bearer ', '');
      const basic = basicCredentials(CLIENT_ID, CLIENT_SECRET);
      for (const secret of [CLIENT_SECRET, token, basic]) {
        sim.inject({ target: 'get', kind: 'status', status: 400, body: JSON.stringify({ message: `${'x'.repeat(290)}${secret} and more` }) });
        const err = await rejection(client.getProgress('x'));
        const seen = `${err.message} ${JSON.stringify(err.toJSON())}`;
        for (const s of [CLIENT_SECRET, token, basic]) assertNoPart(seen, s, 'the error');
        assert.match(err.message, /x{200,}\*\*\*/);
      }
    });

    it('a secret with quotes and backslashes echoed inside JSON (escaped or \\u-escaped) is still found', async () => {
      const secret = 'Se"cr\\et-Value-That-Must-Never-Leak';
      await sim.stop();
      sim = await startSimulator({ clientSecret: secret });
      client = make({ clientSecret: secret });
      const escaped = JSON.stringify(secret).slice(1, -1);
      const unicode = [...secret].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
      for (const form of [escaped, unicode, encodeURIComponent(secret)]) {
        sim.inject({ target: 'token', kind: 'status', status: 401, body: `{"error":"invalid_client","error_description":"bad ${form} secret"}` });
        const err = await rejection(client.getProgress('x'));
        assert.ok(!err.message.includes(secret) && !err.message.includes(escaped), err.message);
        assertNoPart(err.message.replace(/\\/g, ''), secret.replace(/\\/g, ''), 'the error');
        await client.close();
        client = make({ clientSecret: secret });
      }
    });

    it('the token endpoint echoing the request (Basic header and body) on an error leaks nothing', async () => {
      client = make();
      sim.inject({ target: 'token', kind: 'echo', status: 400 });
      const err = await rejection(client.getProgress('x'));
      assertNoPart(err.message, CLIENT_SECRET, 'the error');
      assertNoPart(err.message, basicCredentials(CLIENT_ID, CLIENT_SECRET), 'the error');
      assert.match(err.message, /rejected request with Authorization: Basic \*\*\*/);
    });
  });

  describe('5. tokens in success bodies', () => {
    it('a progress record that echoes the Authorization header carries no token', async () => {
      client = make();
      await startedSession();
      sim.inject({ target: 'get', kind: 'echo' });
      const { record } = await client.getProgress('RFID-1');
      const token = String(sim.requests.filter((r) => r.path === SESSIONS_PATH).at(-1)?.headers.authorization).replace('Bearer ', '');
      const text = JSON.stringify(record);
      assertNoPart(text, token, 'the record');
      assert.equal((record?.echo as { authorization: string }).authorization, 'Bearer ***');
      assert.equal(record?.tokenId, 'RFID-1', 'the rest of the record is as the service sent it');
    });

    it('a 202 that echoes the Authorization header carries no token in its body', async () => {
      client = make();
      sim.inject({ target: 'post', kind: 'echo' });
      const res = await client.sendCommand(start);
      const token = String(sim.requests.filter((r) => r.method === 'POST').at(-1)?.headers.authorization).replace('Bearer ', '');
      assertNoPart(JSON.stringify(res.body), token, 'the 202 body');
      assert.equal((res.body as { echo: { authorization: string } }).echo.authorization, 'Bearer ***');
    });
  });

  describe('6. token endpoint pressure', () => {
    it("a 429 with Retry-After 10 from the token endpoint: no other token request for 10 s (fake clock)", async () => {
      fakeClock();
      client = make({ retry: { maxTotalMs: 30_000 } });
      sim.inject({ target: 'token', kind: 'status', status: 429, headers: { 'Retry-After': '10' } });
      const first = client.getProgress('nobody');
      const t0 = Date.now();
      const seen: number[] = [];
      await onClock(first, 100);
      for (const r of sim.requests.filter((x) => x.path === TOKEN_PATH)) seen.push(r.at - t0);
      assert.equal(seen.length, 2, `token requests at ${seen.join(', ')} ms`);
      assert.ok(seen[1] >= 10_000, `the second token request came after ${seen[1]} ms`);
    });

    it('a service that refuses every token: 100 messages make 2 token requests, not 101', async () => {
      client = make({ tokenCache: { failureBackoffMs: 60_000 } });
      sim.inject({ target: 'service', kind: 'status', status: 401, body: '{"error":"unauthorized"}', times: Infinity });
      const errors: ChargingError[] = [];
      for (let i = 0; i < 100; i++) errors.push(await rejection(client.getProgress(`T${i}`)));
      assert.ok(errors.every((e) => e.code === 'AUTH'));
      assert.equal(tokenRequests(), 2, 'one token, one fresh one after the first 401, then a back-off');
      assert.equal(gets(), 2);
      assert.match(errors[99].message, /refuses freshly issued tokens/);
    });

    it('expires_in 0.001 s: one token for 20 requests, and a warning about the floor', async () => {
      await sim.stop();
      sim = await startSimulator({ advertisedLifetimeSec: 0.001 });
      const warnings: string[] = [];
      client = make({ onWarning: (w) => warnings.push(w) });
      for (let i = 0; i < 20; i++) await client.getProgress(`T${i}`);
      assert.equal(tokenRequests(), 1);
      assert.equal(warnings.length, 1);
      assert.match(warnings[0], /valid for 0\.001 s; it is used for 10 s/);
    });
  });

  describe('7. input that cannot be sent', () => {
    it('a lone surrogate is INVALID_INPUT naming the field, and nothing is sent', async () => {
      client = make();
      const err = await rejection(client.getProgress('RFID-\ud800'));
      assert.equal(err.code, 'INVALID_INPUT');
      assert.equal(err.field, 'token');
      const cmdErr = await rejection(client.sendCommand({ ...start, locationId: 'LOC-\udc00' }));
      assert.equal(cmdErr.field, 'locationId');
      assert.equal(sim.requests.length, 0);
    });
  });

  describe('9. 200 is not 202', () => {
    it('a START answered 200 {"status":"REJECTED"} is passed on with its status, never as a 202', async () => {
      client = make();
      sim.inject({ target: 'post', kind: 'status', status: 200, body: '{"status":"REJECTED"}' });
      const res = await client.sendCommand(start);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.body, { status: 'REJECTED' });
    });
  });
});
