import assert from 'node:assert/strict';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { tokenEndpoint } from '../../../nodes/lib/client/token-endpoint';
import { ChargingServiceSimulator, SESSIONS_PATH, TOKEN_PATH } from '../../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, startSimulator, until, rejection, clientFor as harnessClient } from '../../harness';

function clientFor(sim: ChargingServiceSimulator, extra: Partial<ServiceClientOptions> = {}): ServiceClient {
  return harnessClient(sim, { scope: 'sessions:read  sessions:write', timeoutMs: 2000, retry: { baseDelayMs: 10, maxDelayMs: 50 }, ...extra });
}

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

describe('ServiceClient against the simulator (HTTP on 127.0.0.1, no Node-RED)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  beforeEach(async () => {
    sim = await startSimulator();
    client = clientFor(sim);
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  it('builds the token address from the token URL, and keeps one that already ends in /v1/token', () => {
    assert.equal(tokenEndpoint('https://a.example/auth/'), 'https://a.example/auth/v1/token');
    assert.equal(tokenEndpoint('https://a.example/v1/token'), 'https://a.example/v1/token');
  });

  it('requests the token as spec §4.3 says: Basic credentials, Accept, form body with grant_type and scope', async () => {
    await client.getProgress('RFID-1');
    const req = sim.requests.find((r) => r.path === TOKEN_PATH);
    assert.ok(req, 'a token request was made');
    assert.equal(req.method, 'POST');
    assert.equal(req.headers.authorization, `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`, 'utf8').toString('base64')}`);
    assert.match(String(req.headers.accept), /application\/json/);
    assert.match(String(req.headers['content-type']), /^application\/x-www-form-urlencoded/);
    const form = new URLSearchParams(req.body);
    assert.equal(form.get('grant_type'), 'client_credentials');
    assert.equal(form.get('scope'), 'sessions:read sessions:write');
  });

  it('encodes non-ASCII credentials as UTF-8 before Base64', async () => {
    await sim.stop();
    sim = await new ChargingServiceSimulator({ clientId: 'clïent', clientSecret: 'sécret:with:colons' }).start();
    await client.close();
    client = clientFor(sim, { clientId: 'clïent', clientSecret: 'sécret:with:colons' });
    const res = await client.getProgress('nobody');
    assert.equal(res.record, null);
    assert.equal(sim.counters.tokensIssued, 1);
  });

  it('leaves scope out when none is configured', async () => {
    await client.close();
    client = clientFor(sim, { scope: '  ' });
    await client.getProgress('x');
    const form = new URLSearchParams(sim.requests.find((r) => r.path === TOKEN_PATH)?.body);
    assert.equal(form.has('scope'), false);
  });

  it('sends the Bearer token on every service request and reuses it', async () => {
    await client.getProgress('a');
    await client.getProgress('b');
    const service = sim.requests.filter((r) => r.path === SESSIONS_PATH);
    assert.equal(service.length, 2);
    assert.match(String(service[0].headers.authorization), /^Bearer \S+$/);
    assert.equal(service[0].headers.authorization, service[1].headers.authorization);
    assert.equal(sim.counters.tokenRequests, 1);
  });

  it('makes one token request for 50 concurrent progress queries', async () => {
    await Promise.all(Array.from({ length: 50 }, (_, i) => client.getProgress(`T${i}`)));
    assert.equal(sim.counters.tokenRequests, 1);
    assert.equal(sim.counters.progressQueries, 50);
  });

  it('gets a new token when one really expired at the simulator (1 s lifetime, below the 10 s floor)', async () => {
    await sim.stop();
    sim = await startSimulator({ tokenLifetimeSec: 1 });
    await client.close();
    client = clientFor(sim);
    await client.getProgress('a');
    // The token's lifetime (1 s) is under the floor (10 s): the client still renews at once when the service refuses it.
    await until(() => Date.now() - sim.requests[0].at > 1000, 'the token to expire at the simulator');
    await client.getProgress('b');
    assert.equal(sim.counters.tokenRequests, 2);
    assert.equal(sim.counters.unauthorized, 1, 'one 401, then a new token and one retry');
  });

  it('after a 401 on a valid-looking token: drops it, fetches one new token and retries once', async () => {
    await client.getProgress('warm-up');
    sim.revokeAllTokens();
    const res = await client.getProgress('RFID-1');
    assert.equal(res.record, null);
    assert.equal(sim.counters.tokenRequests, 2);
    assert.equal(sim.counters.unauthorized, 1);
  });

  it('a second 401 with the fresh token is an AUTH error; exactly two service requests are made', async () => {
    sim.inject({ target: 'service', kind: 'status', status: 401, body: '{"error":"unauthorized","message":"scope missing"}', times: 5 });
    const err = await rejection(client.getProgress('RFID-1'));
    assert.equal(err.code, 'AUTH');
    assert.equal(err.statusCode, 401);
    assert.match(err.message, /scope missing/);
    assert.equal(sim.requests.filter((r) => r.path === SESSIONS_PATH).length, 2);
    assert.equal(sim.counters.tokenRequests, 2);
  });

  it('a 401 on START is retried once with a new token and the command reaches the station once', async () => {
    await client.getProgress('warm-up');
    sim.revokeAllTokens();
    const res = await client.sendCommand(start);
    assert.equal(res.statusCode, 202);
    assert.equal(sim.counters.starts, 1);
    assert.ok(sim.session('RFID-1'));
  });

  it('sends START and STOP bodies exactly per spec §2.1 with a JSON content type', async () => {
    await client.sendCommand(start);
    await until(() => (sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
    const progress = await client.getProgress('RFID-1');
    const tx = progress.record?.transactionData?.transactionId;
    assert.ok(tx);
    await client.sendCommand({ action: 'STOP', locationId: 'LOC-1', evseId: '1', token: 'RFID-1', transactionId: tx });
    const posts = sim.requests.filter((r) => r.path === SESSIONS_PATH && r.method === 'POST');
    assert.equal(posts[0].body, '{"action":"START","locationId":"LOC-1","evseId":"1","token":"RFID-1"}');
    assert.equal(posts[1].body, `{"action":"STOP","locationId":"LOC-1","evseId":"1","token":"RFID-1","transactionId":"${tx}"}`);
    assert.match(String(posts[0].headers['content-type']), /^application\/json; charset=utf-8$/);
  });

  it('returns the record unchanged, with evseId as the number the service sent', async () => {
    await client.sendCommand({ ...start, evseId: '42' });
    await until(() => (sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
    const { record } = await client.getProgress('RFID-1');
    assert.equal(record?.evseId, 42);
    assert.equal(record?.tokenId, 'RFID-1');
    assert.equal(typeof record?.transactionData?.meterStart, 'number');
  });

  for (const mode of ['404', '204', 'empty200'] as const) {
    it(`reports "no session" as a null record when the service answers ${mode}`, async () => {
      await sim.stop();
      sim = await startSimulator({ noSession: mode });
      await client.close();
      client = clientFor(sim);
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
    });
  }

  it('puts the HTTP status and the service text in a 4xx error, without retrying', async () => {
    await client.sendCommand(start);
    const err = await rejection(client.sendCommand(start));
    assert.equal(err.code, 'HTTP');
    assert.equal(err.statusCode, 409);
    assert.match(err.message, /START failed: the service answered 409: conflict: a session is already active/);
    assert.equal(sim.counters.starts, 2);
  });

  it('retries a progress query on 503 and succeeds', async () => {
    sim.inject({ target: 'get', kind: 'status', status: 503, times: 2 });
    const res = await client.getProgress('nobody');
    assert.equal(res.record, null);
    assert.equal(sim.counters.progressQueries, 1, 'two 503s, then one real query');
    assert.equal(sim.requests.filter((r) => r.path === SESSIONS_PATH).length, 3, 'two retries');
  });

  it('never repeats a START that got a 502: outcome unknown', async () => {
    sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
    const err = await rejection(client.sendCommand(start));
    assert.equal(err.code, 'OUTCOME_UNKNOWN');
    assert.equal(err.outcomeUnknown, true);
    assert.match(err.message, /query the session's progress/);
    assert.equal(sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).length, 1);
    assert.equal(sim.counters.duplicateStarts, 0);
  });

  it('a body that is not JSON in a 200 progress answer is a BAD_RESPONSE error', async () => {
    await client.sendCommand(start);
    sim.inject({ target: 'get', kind: 'malformed' });
    const err = await rejection(client.getProgress('RFID-1'));
    assert.equal(err.code, 'BAD_RESPONSE');
    assert.match(err.message, /progress query: the service answered 200 with a body that is not valid JSON/);
  });

  it('authentication failures name authentication and the status; wrong secret is not retried', async () => {
    await client.close();
    client = clientFor(sim, { clientSecret: 'wrong-secret-value' });
    const err = await rejection(client.getProgress('x'));
    assert.equal(err.code, 'AUTH');
    assert.equal(err.statusCode, 401);
    assert.match(err.message, /^Authentication failed: the token endpoint .* answered 401 \(invalid_client: client authentication failed\)/);
    assert.ok(!err.message.includes('wrong-secret-value'));
    assert.equal(sim.counters.tokenRequests, 1);
  });

  it('never carries the secret or the token in an error, even when the service echoes them', async () => {
    await client.getProgress('warm-up');
    const token = String(sim.requests.find((r) => r.path === SESSIONS_PATH)?.headers.authorization).replace('Bearer ', '');
    sim.inject({ target: 'get', kind: 'status', status: 400, body: JSON.stringify({ message: `bad request with ${token} and ${CLIENT_SECRET}` }) });
    const err = await rejection(client.getProgress('x'));
    assert.ok(!JSON.stringify(err.toJSON()).includes(token));
    assert.ok(!err.message.includes(token));
    assert.ok(!err.message.includes(CLIENT_SECRET));
    assert.match(err.message, /bad request with \*\*\* and \*\*\*/);
  });

  it('keeps at most maxInFlight requests on the wire', async () => {
    await client.close();
    client = clientFor(sim, { maxInFlight: 3 });
    await client.getProgress('warm-up'); // the token request is not a service request
    Object.assign(sim.counters, { peakConcurrent: 0, progressQueries: 0 });
    sim.inject({ target: 'get', kind: 'latency', delayMs: 50, times: Infinity });
    await Promise.all(Array.from({ length: 12 }, (_, i) => client.getProgress(`T${i}`)));
    assert.equal(sim.counters.progressQueries, 12);
    assert.equal(sim.counters.peakConcurrent, 3, 'never more than 3 at the service, and all 3 used');
  });

  it('a fenced command gives its connection back: with Max in flight 1, three fenced STARTs in a row all go, and a query after them', async () => {
    await client.close();
    client = clientFor(sim, { maxInFlight: 1, retry: { maxTotalMs: 1_000 } });
    for (let i = 0; i < 3; i++) assert.equal((await client.sendCommand({ ...start, evseId: `${i + 1}`, token: `RFID-F${i}` }, { mayProceed: () => true })).statusCode, 202);
    assert.equal((await client.getProgress('RFID-1')).statusCode, 404);
  });
});
