/**
 * API gateways and identity providers: an API key header on every service
 * request (never to the token endpoint, never in an error), extra token
 * parameters, and Test connection telling a gateway's refusal from the service's.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { ServiceClient } from '../../../nodes/lib/client/service-client';
import { parseTokenParams } from '../../../nodes/lib/client/token-endpoint';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator, SESSIONS_PATH, TOKEN_PATH } from '../../../simulator/simulator';
import { clientFor, rejection, startSimulator } from '../../harness';

const API_KEY = 'gw-Key-0123456789abcdef';
const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

describe('API gateways and identity providers', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient | null = null;
  beforeEach(async () => {
    sim = await startSimulator();
  });
  afterEach(async () => {
    await client?.close();
    client = null;
    await sim.stop();
  });

  it('sends the API key in the configured header on every service request, never to the token endpoint', async () => {
    client = clientFor(sim, { apiKey: API_KEY, apiKeyHeader: 'Ocp-Apim-Subscription-Key' });
    await client.getProgress('nobody');
    await client.sendCommand(start);
    const service = sim.requests.filter((r) => r.path === SESSIONS_PATH);
    const token = sim.requests.filter((r) => r.path === TOKEN_PATH);
    assert.equal(service.length, 2);
    for (const r of service) assert.equal(r.headers['ocp-apim-subscription-key'], API_KEY);
    assert.equal(token.length, 1);
    assert.ok(!JSON.stringify(token[0].headers).includes(API_KEY), 'not sent to the token endpoint');
    assert.ok(!token[0].body.includes(API_KEY));
  });

  it('x-api-key by default; no key, no header', async () => {
    client = clientFor(sim, { apiKey: API_KEY });
    await client.getProgress('nobody');
    assert.equal(sim.requests.find((r) => r.path === SESSIONS_PATH)?.headers['x-api-key'], API_KEY);
    await client.close();
    client = clientFor(sim, { apiKey: '' });
    await client.getProgress('nobody');
    assert.equal(sim.requests.filter((r) => r.path === SESSIONS_PATH).at(-1)?.headers['x-api-key'], undefined);
  });

  it('an API key echoed by the service never shows in an error', async () => {
    const server = http.createServer((req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ message: `bad key ${String(req.headers['x-api-key'])}` })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      client = clientFor(sim, { apiKey: API_KEY, baseUrl: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}` });
      const err = (await rejection(client.getProgress('x'))) as ChargingError;
      assert.match(err.message, /bad key \*\*\*/);
      assert.ok(!JSON.stringify({ m: err.message, s: err.serviceMessage }).includes(API_KEY));
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('adds the token parameters to the token request', async () => {
    client = clientFor(sim, { tokenParams: parseTokenParams('audience=https%3A%2F%2Fapi.example.com&resource=urn:charging') });
    await client.getProgress('nobody');
    const form = new URLSearchParams(sim.requests.find((r) => r.path === TOKEN_PATH)!.body);
    assert.equal(form.get('audience'), 'https://api.example.com');
    assert.equal(form.get('resource'), 'urn:charging');
    assert.equal(form.get('grant_type'), 'client_credentials');
  });

  describe('Token parameters are checked', () => {
    for (const bad of ['audience', 'audience=a&&b=c', '=x', 'a b=c', 'x=%zz']) {
      it(`"${bad}" is malformed: CONFIG`, () => {
        assert.throws(() => parseTokenParams(bad), (e: ChargingError) => e.code === 'CONFIG' && /Token parameters/.test(e.message));
      });
    }
    for (const reserved of ['grant_type=password', 'audience=x&client_id=evil', 'client_secret=x', 'SCOPE=admin']) {
      it(`"${reserved}" may not set a reserved parameter: CONFIG`, () => {
        assert.throws(() => parseTokenParams(reserved), (e: ChargingError) => e.code === 'CONFIG' && /may not set/.test(e.message));
      });
    }
    it('empty is none; URL-encoded values are decoded', () => {
      assert.deepEqual(parseTokenParams(''), []);
      assert.deepEqual(parseTokenParams('audience=https://api.example.com&x=a%26b'), [
        ['audience', 'https://api.example.com'],
        ['x', 'a&b'],
      ]);
    });
  });

  describe('Test connection: the gateway refusing the key, or the service refusing the token', () => {
    let gateway: http.Server;
    let answer: { status: number; headers: Record<string, string>; body: string };
    beforeEach(async () => {
      gateway = http.createServer((_req, res) => res.writeHead(answer.status, answer.headers).end(answer.body));
      await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', () => r()));
    });
    afterEach(async () => {
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
    });
    const test = () => {
      client = clientFor(sim, { apiKey: API_KEY, baseUrl: `http://127.0.0.1:${(gateway.address() as net.AddressInfo).port}` });
      return client.testConnection();
    };

    it('AWS API Gateway: 403 with x-amzn-ErrorType', async () => {
      answer = { status: 403, headers: { 'content-type': 'application/json', 'x-amzn-errortype': 'ForbiddenException' }, body: '{"message":"Forbidden"}' };
      const report = await test();
      assert.equal(report.ok, false);
      assert.match(report.message, /the API gateway \(AWS\) at http:\/\/127\.0\.0\.1:\d+ refused the request \(403.*check the API key and its header name/);
      assert.ok(!report.message.includes(API_KEY));
    });

    it('a 401 without a Bearer challenge is the gateway', async () => {
      answer = { status: 401, headers: { 'content-type': 'application/json' }, body: '{"message":"Invalid authentication credentials"}' };
      const report = await test();
      assert.match(report.message, /a gateway in front of the service .* refused the request \(401/);
    });

    it('a 401 with WWW-Authenticate: Bearer is the service refusing the token', async () => {
      answer = { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"' }, body: '' };
      const report = await test();
      assert.equal(report.ok, false);
      assert.match(report.message, /the service at .* refused it \(401\)/);
      assert.doesNotMatch(report.message, /gateway/);
    });
  });
});
