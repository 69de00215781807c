/**
 * Test connection through Node-RED's real admin HTTP API, as a user with only
 * the write permission could call it: nothing of Node-RED's environment comes
 * back, and a stored secret (or the token it buys) goes only where the
 * deployed configuration sends it, with the deployed TLS configuration.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { assertNoSecret, flowFor, helper, load, loggedText, NODES, startSimulator, CLIENT_ID, CLIENT_SECRET, runtimeSuite } from '../harness';

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [[]] };
/** A value of Node-RED's environment the dialog's user must never see or send elsewhere. */
const ENV_SECRET = 'Env-Only-Secret-Value-0123456789-abcdefghijklmnop';

/** An HTTP server that records what reaches it (path and headers) and answers 404. */
async function captureServer(): Promise<{ url: string; seen: Array<{ url: string; headers: http.IncomingHttpHeaders }>; close(): Promise<void> }> {
  const seen: Array<{ url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: String(req.url), headers: req.headers });
    req.resume();
    res.writeHead(404, { 'content-type': 'text/plain' }).end('secret page content');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function post(body: Record<string, unknown>) {
  return helper.request().post('/charging-service/test').send(body).expect(200);
}

function assertNothingOf(text: string, ...values: string[]): void {
  for (const v of values) assert.ok(!text.includes(v) && !text.includes(v.slice(0, 20)), `the answer holds a value it must not: ${text}`);
}

describe('Test connection: where a token from the stored secret may go', () => {
  const rt = runtimeSuite();

  it('does not send it to a Base URL other than the deployed one, and says why it did not probe', async () => {
    await load(rt.sim, [PROGRESS]);
    const elsewhere = await captureServer();
    try {
      const res = await post({ id: 'svc', baseUrl: elsewhere.url, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' });
      assert.deepEqual(elsewhere.seen, [], 'no request, no token, reached the other host');
      assert.equal(res.body.probed, false);
      assert.match(res.body.message, /token received .*The service was not probed: a token issued for the stored secret is only sent to the deployed Base URL/);
      assert.equal(rt.sim.counters.tokensIssued, 1, 'the deployed token URL was asked');
    } finally {
      await elsewhere.close();
    }
  });

  it('probes the deployed Base URL with the stored secret', async () => {
    await load(rt.sim, [PROGRESS]);
    const res = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' });
    assert.equal(res.body.ok, true, res.body.message);
    assert.notEqual(res.body.probed, false);
    assert.equal(rt.sim.counters.progressQueries, 1);
  });

  it("tests URLs the deployed configuration names as ${NAME} of its flow's environment or as $(NAME), as Node-RED expanded them", async () => {
    process.env.CHARGING_TEST_AUTH_URL = rt.sim.authUrl;
    try {
      const f = flowFor(rt.sim, [PROGRESS], { z: 'f1', baseUrl: '${SVC_BASE_URL}', authUrl: '$(CHARGING_TEST_AUTH_URL)' });
      f.flow[0] = { ...f.flow[0], env: [{ name: 'SVC_BASE_URL', value: rt.sim.baseUrl, type: 'str' }] };
      await helper.load(NODES, f.flow, f.credentials);
      const res = await post({ id: 'svc', baseUrl: '${SVC_BASE_URL}', authUrl: '$(CHARGING_TEST_AUTH_URL)', clientId: CLIENT_ID, clientSecret: '__PWRD__' });
      assert.equal(res.body.ok, true, res.body.message);
      assert.notEqual(res.body.probed, false, res.body.message);
      assert.equal(rt.sim.counters.progressQueries, 1);
    } finally {
      delete process.env.CHARGING_TEST_AUTH_URL;
    }
  });

  it('probes a Base URL given as ${NAME} when the deployed configuration has the same ${NAME}', async () => {
    const other = await startSimulator();
    process.env.CHARGING_TEST_PROBE_URL = other.baseUrl;
    try {
      await load(rt.sim, [PROGRESS], { baseUrl: '${CHARGING_TEST_PROBE_URL}' });
      const res = await post({ id: 'svc', baseUrl: '${CHARGING_TEST_PROBE_URL}', authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' });
      assert.notEqual(res.body.probed, false, res.body.message);
      assert.ok(other.requests.length >= 1, 'the environment-named service was probed');
    } finally {
      delete process.env.CHARGING_TEST_PROBE_URL;
      await other.stop();
    }
  });
});

describe('Test connection: nothing of the environment, no stored secret to a typed place', () => {
  const rt = runtimeSuite();
  beforeEach(() => {
    process.env.CHARGING_TEST_ENV_SECRET = ENV_SECRET;
  });
  afterEach(() => {
    delete process.env.CHARGING_TEST_ENV_SECRET;
    delete process.env.CHARGING_TEST_OTHER_URL;
  });

  it('does not read a ${NAME} typed as Base URL, and echoes no value in its error', async () => {
    await load(rt.sim, [PROGRESS]);
    const res = await post({ id: 'svc', baseUrl: '${CHARGING_TEST_ENV_SECRET}', authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
    assert.equal(res.body.ok, false);
    assertNothingOf(res.text, ENV_SECRET);
    assert.match(res.body.message, /Base URL: a \$\{NAME\} typed in the dialog is read .* only when the deployed configuration has the same one/);
  });

  it('does not read a ${NAME} typed as Token parameters', async () => {
    await load(rt.sim, [PROGRESS]);
    const res = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, tokenParams: '${CHARGING_TEST_ENV_SECRET}', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
    assert.equal(res.body.ok, false);
    assertNothingOf(res.text, ENV_SECRET);
    assert.equal(rt.sim.counters.tokensIssued, 0);
  });

  it('names the field of a malformed value, never the value', async () => {
    await load(rt.sim, [PROGRESS]);
    const typed = 'Typed-Value-Never-Echoed-9876543210 x';
    for (const field of ['baseUrl', 'authUrl', 'tokenParams', 'apiKeyHeader', 'maxRequestsPerSec', 'authMethod']) {
      const body: Record<string, unknown> = { baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, [field]: typed };
      const res = await post(body);
      assert.equal(res.body.ok, false, field);
      assertNothingOf(res.text, typed);
    }
  });

  it('does not send an environment value typed as API key ${NAME} to a typed URL', async () => {
    await load(rt.sim, [PROGRESS]);
    const elsewhere = await captureServer();
    try {
      const res = await post({ id: 'svc', baseUrl: elsewhere.url, authUrl: rt.sim.authUrl, apiKey: '${CHARGING_TEST_ENV_SECRET}', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
      assert.equal(res.body.ok, false);
      assertNothingOf(JSON.stringify(elsewhere.seen), ENV_SECRET);
      assert.equal(elsewhere.seen.length, 0);
    } finally {
      await elsewhere.close();
    }
  });

  it('does not send the stored secret to a token URL typed as ${NAME}', async () => {
    await load(rt.sim, [PROGRESS]);
    const elsewhere = await captureServer();
    process.env.CHARGING_TEST_OTHER_URL = elsewhere.url;
    try {
      const res = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: '${CHARGING_TEST_OTHER_URL}', clientId: CLIENT_ID, clientSecret: '__PWRD__' });
      assert.equal(res.body.ok, false);
      assert.deepEqual(elsewhere.seen, [], 'neither the stored secret nor anything else reached the other host');
    } finally {
      await elsewhere.close();
    }
  });

  it('a ? or # in a typed URL never cancels the fixed path: nothing but {URL}/v1/token is reached, nothing of the page comes back', async () => {
    await load(rt.sim, [PROGRESS]);
    const elsewhere = await captureServer();
    try {
      for (const suffix of ['/admin/private#', '/admin/private?']) {
        const res = await post({ baseUrl: rt.sim.baseUrl, authUrl: `${elsewhere.url}${suffix}`, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
        assert.equal(res.body.ok, false);
        // Refused, or (where the token address keeps its path before a query) sent to {URL}/v1/token only.
        if (res.body.ok === false && /Token URL/.test(res.body.message)) assert.match(res.body.message, /Token URL: a \? or # in it would cancel the path/);
        assertNothingOf(res.text, 'secret page content');
      }
      for (const suffix of ['/admin/private#', '/admin/private?x=']) {
        const res = await post({ baseUrl: `${elsewhere.url}${suffix}`, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
        assert.equal(res.body.ok, false);
        assert.match(res.body.message, /Base URL: a \? or # in it would cancel the path \/poi\/v1\/charging-sessions/);
      }
      for (const r of elsewhere.seen) assert.ok(new URL(r.url, elsewhere.url).pathname.endsWith('/v1/token'), `no other path of the typed host was reached: ${r.url}`);
    } finally {
      await elsewhere.close();
    }
  });

  it('uses the deployed TLS configuration with the stored secret, not the one named in the request', async () => {
    await load(rt.sim, [PROGRESS]);
    const res = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__', tls: 'some-other-tls-config' });
    assert.equal(res.body.ok, true, res.body.message);
  });

  it('gives one answer for every failure of a typed redis:// URL (no port scanner)', async () => {
    await load(rt.sim, [PROGRESS]);
    const notRedis = await captureServer();
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    try {
      const base = { baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET };
      const refused = await post({ ...base, coordination: `redis://127.0.0.1:${closedPort}` });
      const http = await post({ ...base, coordination: notRedis.url.replace('http:', 'redis:') });
      assert.equal(refused.body.redis.ok, false);
      assert.equal(http.body.redis.ok, false);
      assert.equal(refused.body.redis.message, http.body.redis.message, 'a closed port and an HTTP server look the same');
      assert.doesNotMatch(refused.body.redis.message, /ECONNREFUSED/);
    } finally {
      await notRedis.close();
    }
  });

  it('warns of a plain redis:// to another machine, in the log and in Test connection', async function () {
    // This machine's own non-loopback address: another host as far as the URL says, and a closed port answers at once.
    const address = Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    if (!address) this.skip();
    const url = `redis://${address}:1`;
    await load(rt.sim, [PROGRESS], {}, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: url } });
    const res = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__', coordination: '__PWRD__' });
    assert.match(res.body.redis.message, /plain redis:\/\/ on another machine/);
    assert.match(loggedText(), /plain redis:\/\/ on another machine/);
    const local = await post({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__', coordination: 'redis://127.0.0.1:1' });
    assert.doesNotMatch(local.body.redis.message, /plain redis:\/\//, 'not for this machine');
  });

  it('always answers, even when the request makes it fail unexpectedly', async () => {
    await load(rt.sim, [PROGRESS]);
    // JSON cannot hold a function, but it can hold an object that String() cannot convert.
    const hostile = { toString: 1, valueOf: 1 };
    const res = await helper
      .request()
      .post('/charging-service/test')
      .timeout(5_000)
      .send({ id: 'svc', baseUrl: hostile, authUrl: hostile, clientId: CLIENT_ID, clientSecret: '__PWRD__', coordination: hostile });
    assert.ok(res.status === 200 || res.status === 500, `status ${res.status}`);
    assert.equal(res.body.ok, false);
    assert.equal(typeof res.body.message, 'string');
  });

  it('refuses a tls id that is not a tls-config (another node, a prototype key) by name, with no program error', async () => {
    await load(rt.sim, [PROGRESS]);
    for (const tls of ['svc', 'progress', '__proto__', 'constructor', 'toString', 'no-such-node']) {
      const res = await post({ baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, tls, fleetTls: tls, coordination: 'redis://127.0.0.1:1' });
      assert.equal(res.body.ok, false, tls);
      assert.match(res.body.message, /TLS configuration could not be found/, `${tls}: ${res.body.message}`);
      assert.match(res.body.redis.message, /TLS configuration could not be found/, `${tls}: ${res.body.redis.message}`);
      assert.equal(rt.sim.counters.tokenRequests, 0, `${tls}: nothing was sent without the TLS configuration asked for`);
    }
  });

  it('resolves no partial, doubled, nested or old-style ${NAME} form typed in any field, nor sends one anywhere', async () => {
    await load(rt.sim, [PROGRESS]);
    const elsewhere = await captureServer();
    const host = elsewhere.url.replace('http://', '');
    const forms = ['${CHARGING_TEST_ENV_SECRET}x', '$${CHARGING_TEST_ENV_SECRET}', '${${CHARGING_TEST_ENV_SECRET}}', '$(CHARGING_TEST_ENV_SECRET)', '${CHARGING_TEST_ENV_SECRET} ', '${NR_NODE_ID}'];
    try {
      for (const form of forms) {
        const bodies: Array<Record<string, unknown>> = [
          { baseUrl: `http://${host}/${form}`, authUrl: `http://${host}/${form}` },
          { baseUrl: elsewhere.url, authUrl: elsewhere.url, apiKey: form, apiKeyHeader: form, tokenParams: `a=${form}`, scope: form, clientId: form },
          { baseUrl: elsewhere.url, authUrl: elsewhere.url, apiKey: form, tokenParams: form, clientId: CLIENT_ID, coordination: `redis://:${form}@127.0.0.1:1` },
        ];
        for (const body of bodies) {
          const res = await post({ clientId: CLIENT_ID, clientSecret: 'typed-secret-1234', ...body });
          assertNothingOf(res.text, ENV_SECRET);
        }
      }
      assertNothingOf(JSON.stringify(elsewhere.seen), ENV_SECRET);
      assertNoSecret(loggedText(), [ENV_SECRET, CLIENT_SECRET], 'the log');
    } finally {
      await elsewhere.close();
    }
  });

  it('answers every non-string JSON type in every field with a clear refusal, never a program error', async () => {
    await load(rt.sim, [PROGRESS]);
    const fields = ['id', 'baseUrl', 'authUrl', 'scope', 'authMethod', 'timeout', 'maxInFlight', 'maxRequestsPerSec', 'allowInsecureHttp', 'tls', 'apiKeyHeader', 'tokenParams', 'fleetKey', 'fleetTls', 'clientId', 'clientSecret', 'apiKey', 'coordination'];
    const values: unknown[] = [null, 0, -1, 1e308, true, [], ['https://x.example'], {}, { __proto__: { ok: true } }, { length: 1 }];
    for (const field of fields) {
      for (const value of values) {
        const body = { id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__', [field]: value };
        const res = await helper.request().post('/charging-service/test').timeout(10_000).send(body);
        assert.equal(res.status, 200, `${field}=${JSON.stringify(value)}: status ${res.status}`);
        assert.equal(typeof res.body.message, 'string', `${field}=${JSON.stringify(value)}`);
        assert.doesNotMatch(res.body.message, /is not a function|Cannot read|undefined|\[object Object\]|TypeError/, `${field}=${JSON.stringify(value)}: ${res.body.message}`);
      }
    }
  });
});
