/**
 * The README's promises in three columns (issue 33): plain http, https with a
 * private CA (the TLS options a tls-config node gives), and https through an
 * authenticating CONNECT proxy. Each case makes the same assertion in every
 * column; only words that name a proxy's own answer differ.
 */
import assert from 'node:assert/strict';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator, SESSIONS_PATH, SimulatorOptions } from '../../../simulator/simulator';
import { busiestSecond, clientFor, rejection, startSimulator } from '../../harness';
import { TestProxy } from '../../proxy-server';
import { testCerts } from './tls-certs';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };
const fast = { baseDelayMs: 20, maxDelayMs: 100, maxTotalMs: 8000 };
const USER = 'corp-user';
const PASSWORD = 'p@ss:50%off';

interface Column {
  name: string;
  tls: boolean;
  proxy: boolean;
}

const COLUMNS: Column[] = [
  { name: 'http', tls: false, proxy: false },
  { name: 'https, private CA', tls: true, proxy: false },
  { name: 'https through an authenticating CONNECT proxy', tls: true, proxy: true },
];

/** No word that would send a person to their certificates. */
function assertNoTlsBlame(err: ChargingError): void {
  assert.doesNotMatch(err.message, /TLS|certificate|handshake/i, err.message);
}

for (const col of COLUMNS) {
  describe(`transport matrix: ${col.name}`, () => {
    const certs = testCerts();
    const scheme = col.tls ? 'https' : 'http';
    let sims: ChargingServiceSimulator[] = [];
    let proxy: TestProxy | null = null;
    let client: ServiceClient | null = null;

    const sim = async (opts: SimulatorOptions = {}) => {
      const s = await startSimulator({ ...(col.tls ? { tls: { key: certs.serverKey, cert: certs.serverCert } } : {}), ...opts });
      sims.push(s);
      return s;
    };
    const make = async (service: ChargingServiceSimulator, extra: Partial<ServiceClientOptions> = {}) => {
      if (col.proxy && !proxy) proxy = await new TestProxy({ requireAuth: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` }).start();
      client = clientFor(service, {
        timeoutMs: 2000,
        tls: col.tls ? { ca: certs.caCert } : undefined,
        proxy: proxy ? `http://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${proxy.port}` : false,
        ...extra,
        retry: { ...fast, ...extra.retry },
      });
      return client;
    };
    /** What a refused or unresolvable service looks like from here: the client's own words, or the proxy's 502. */
    const unreachable = (direct: RegExp) => (col.proxy ? /the proxy http:\/\/127\.0\.0\.1:\d+ answered 502 to CONNECT/ : direct);

    afterEach(async () => {
      await client?.close();
      client = null;
      await proxy?.stop();
      proxy = null;
      for (const s of sims) await s.stop();
      sims = [];
    });

    it('a service restarting: a START meanwhile is NETWORK and sent again per the POST rules; a query waits for it within its 30 s', async () => {
      const service = await sim();
      const port = service.options.port;
      await make(service);
      await client!.getProgress('warm-up'); // the token, kept by the simulator across its restart
      await service.stop();
      const err = await rejection(client!.sendCommand(start));
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.equal(err.retryable, true);
      assert.match(err.message, unreachable(new RegExp(`connection refused by ${scheme}://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`)));
      assert.match(err.message, /gave up after 3 attempts/);
      assertNoTlsBlame(err);
      // Four attempts with these pauses span ~150 ms; the service is back after 700 ms.
      service.requests.length = 0;
      const query = client!.getProgress('nobody');
      await new Promise((r) => setTimeout(r, 700));
      await service.start();
      const res = await query;
      assert.equal(res.record, null);
      assert.equal(service.requests.filter((r) => r.method === 'GET').length, 1);
      assert.equal(service.counters.starts, 0);
    });

    it('DNS failure of the service host: NETWORK, retryable, START never OUTCOME_UNKNOWN, no word about TLS', async () => {
      const tokens = await sim();
      await make(tokens, { baseUrl: `${scheme}://charging-service.invalid:8443`, retry: { maxTotalMs: 800 } });
      const err = await rejection(client!.sendCommand(start));
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.equal(err.retryable, true);
      assert.match(err.message, unreachable(/could not resolve host charging-service\.invalid \(ENOTFOUND\)/));
      assertNoTlsBlame(err);
      const q = await rejection(client!.getProgress('nobody'));
      assert.equal(q.code, 'NETWORK', q.message);
      assertNoTlsBlame(q);
    });

    it('DNS failure of the token host: NETWORK, not "authentication failed", no word about TLS', async () => {
      const service = await sim();
      await make(service, { authUrl: `${scheme}://auth.invalid:8443`, retry: { maxTotalMs: 2000 } });
      const err = await rejection(client!.getProgress('nobody'));
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.retryable, true);
      assert.match(err.message, /^Could not get an access token from https?:\/\/auth\.invalid:8443: /);
      assert.match(err.message, unreachable(/could not resolve host auth\.invalid \(ENOTFOUND\)/));
      assert.doesNotMatch(err.message, /Authentication failed/);
      assertNoTlsBlame(err);
      assert.equal(service.requests.filter((r) => r.path === SESSIONS_PATH).length, 0);
    });

    it('a server that closes after every answer: queries and a START all succeed, the START arrives once', async () => {
      const service = await sim();
      await make(service);
      service.inject({ target: 'any', kind: 'close-after-answer', times: Infinity });
      for (let i = 0; i < 4; i++) assert.equal((await client!.getProgress(`CA-${i}`)).record, null);
      await client!.sendCommand(start);
      for (let i = 0; i < 3; i++) await client!.getProgress('RFID-1');
      assert.equal(service.counters.starts, 1);
    });

    it('a server that closes idle connections without a hint: queries spaced by its idle time all succeed', async () => {
      const service = await sim({ idleCloseMs: 80 });
      await make(service);
      for (let i = 0; i < 6; i++) {
        assert.equal((await client!.getProgress(`IC-${i}`)).record, null);
        await new Promise((r) => setTimeout(r, 80));
      }
      await client!.sendCommand(start);
      assert.equal(service.counters.starts, 1);
    });

    it('Max requests per second after a stall: no 1 s window at the service holds more than the limit + 1', async () => {
      const service = await sim();
      await make(service, { maxRequestsPerSec: 4, maxInFlight: 2, timeoutMs: 4000 });
      await client!.getProgress('warm-up');
      await new Promise((r) => setTimeout(r, 300)); // the warm-up's place passes
      service.requests.length = 0;
      service.inject({ target: 'get', kind: 'latency', delayMs: 1200, times: 2 });
      // Two queries stall for 1.2 s in the only two slots; six wait behind them.
      await Promise.all(Array.from({ length: 8 }, (_, i) => client!.getProgress(`ST-${i}`)));
      assert.equal(service.requests.filter((r) => r.method === 'GET').length, 8);
      const most = busiestSecond(service);
      assert.ok(most <= 5, `busiest second at the service held ${most} requests (limit 4)`);
    });

    it('Max requests per second after a burst of 429s: the rate drops once, and the queries and a START go out in time', async () => {
      const service = await sim();
      await make(service, { maxRequestsPerSec: 10, timeoutMs: 2000, retry: { maxTotalMs: 6000 } });
      await client!.getProgress('warm-up');
      service.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '0' }, times: 8 });
      const queries = Promise.all(Array.from({ length: 8 }, (_, i) => client!.getProgress(`TH-${i}`)));
      // One throttling episode: halved once, not once per 429 (10/s would have become 0.039/s, 25 s a request).
      await new Promise((r) => setTimeout(r, 900));
      assert.ok(client!.requestRate.current >= 5, `rate ${client!.requestRate.current}`);
      await queries;
      await client!.sendCommand(start);
      assert.equal(service.counters.starts, 1);
    });
  });
}

describe('transport matrix: the proxy itself fails (https through a CONNECT proxy)', () => {
  const certs = testCerts();
  let service: ChargingServiceSimulator;
  let proxy: TestProxy;
  let client: ServiceClient | null = null;

  /** The service over https through the proxy; the token fetched (and a query made) before the proxy starts failing. */
  async function setUp(mode: 'silent' | 'reset' | 'lf', extra: Partial<ServiceClientOptions> = {}): Promise<ServiceClient> {
    service = await startSimulator({ tls: { key: certs.serverKey, cert: certs.serverCert } });
    proxy = await new TestProxy().start();
    client = clientFor(service, { proxy: proxy.url, tls: { ca: certs.caCert }, timeoutMs: 2000, ...extra, retry: { ...fast, ...extra.retry } });
    await client.getProgress('warm-up');
    proxy.connectMode = mode;
    proxy.dropConnections();
    await new Promise((r) => setTimeout(r, 50));
    proxy.seen.length = 0;
    proxy.connections = 0;
    service.requests.length = 0;
    return client;
  }

  async function openAtProxy(): Promise<number> {
    return proxy.openClientConnections();
  }

  async function untilNoneOpen(ms: number): Promise<number> {
    const end = Date.now() + ms;
    let open = await openAtProxy();
    while (open > 0 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 20));
      open = await openAtProxy();
    }
    return open;
  }

  afterEach(async () => {
    await client?.close();
    client = null;
    await proxy?.stop();
    await service?.stop();
  });

  it('a proxy that accepts and never answers CONNECT: 20 queries end at their deadline with NETWORK, and no connection stays open at the proxy', async () => {
    await setUp('silent', { timeoutMs: 300, retry: { maxTotalMs: 300 } });
    const errs = await Promise.all(Array.from({ length: 20 }, (_, i) => rejection(client!.getProgress(`S-${i}`))));
    for (const err of errs) {
      assert.equal(err.code, 'NETWORK', err.message);
      assert.match(err.message, new RegExp(`no connection to https://127\\.0\\.0\\.1:${service.options.port} within \\d+ ms \\(the proxy http://127\\.0\\.0\\.1:${proxy.port} did not open a tunnel\\); nothing was sent`));
    }
    assert.equal(proxy.connections, 20, 'each query asked for its tunnel');
    assert.equal(await untilNoneOpen(2000), 0, 'every pending CONNECT was closed with its deadline');
  });

  it('a START whose CONNECT is still pending at its deadline is NETWORK, never OUTCOME_UNKNOWN', async () => {
    await setUp('silent', { timeoutMs: 300, retry: { postAttempts: 1 } });
    const err = await rejection(client!.sendCommand(start));
    assert.equal(err.code, 'NETWORK', err.message);
    assert.equal(err.outcomeUnknown, false);
    assert.match(err.message, /did not open a tunnel\); nothing was sent/);
    assert.equal(service.counters.starts, 0);
  });

  it('closing the client (a redeploy) ends every pending CONNECT: no connection stays open at the proxy', async () => {
    await setUp('silent', { timeoutMs: 10_000 });
    const pending = Array.from({ length: 5 }, (_, i) => rejection(client!.getProgress(`C-${i}`)));
    const end = Date.now() + 2000;
    while (proxy.connections < 5 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.equal(await openAtProxy(), 5);
    await client!.close();
    for (const err of await Promise.all(pending)) assert.equal(err.code, 'CLOSED', err.message);
    assert.equal(await untilNoneOpen(2000), 0);
  });

  it('a proxy that resets the connection after reading CONNECT: a START is NETWORK, sent again per the POST rules, never OUTCOME_UNKNOWN', async () => {
    await setUp('reset');
    const err = await rejection(client!.sendCommand(start));
    assert.equal(err.code, 'NETWORK', err.message);
    assert.equal(err.outcomeUnknown, false);
    assert.match(err.message, new RegExp(`the proxy http://127\\.0\\.0\\.1:${proxy.port} gave no valid answer to CONNECT \\(ECONNRESET`));
    assert.match(err.message, /gave up after 3 attempts/);
    assert.equal(proxy.seen.length, 3);
    assert.equal(service.counters.starts, 0);
  });

  it('a CONNECT answer whose lines end in a bare LF opens the tunnel', async () => {
    await setUp('lf');
    const res = await client!.getProgress('nobody');
    assert.equal(res.record, null);
    await client!.sendCommand(start);
    assert.equal(service.counters.starts, 1);
    assert.ok(proxy.seen.length >= 2);
  });
});
