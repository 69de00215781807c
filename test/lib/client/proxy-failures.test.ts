/**
 * Proxy failures name the proxy and mean nothing reached the service (NETWORK,
 * never OUTCOME_UNKNOWN); proxy credentials are redacted in every form; NO_PROXY
 * reads CIDR blocks and IPv6 addresses as curl does.
 */
import assert from 'node:assert/strict';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { noProxyMatches, proxyForUrl } from '../../../nodes/lib/client/proxy-env';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, freePort, rejection, startSimulator } from '../../harness';
import { TestProxy } from '../../proxy-server';
import { SIM_CERT, SIM_KEY } from './transport.test';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };
const fast = { timeoutMs: 2000, retry: { baseDelayMs: 10, maxDelayMs: 20, maxTotalMs: 5000 } };

const USER = 'corp-user';
const PASSWORD = 'p@ss:w/rd+Pr0xySecret';
const ENCODED = encodeURIComponent(PASSWORD);
const BASIC = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
const secretForms = [PASSWORD, ENCODED, BASIC, `${USER}:${PASSWORD}`];

function restoreEnv(saved: Record<string, string | undefined>): void {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

function assertNoProxySecret(text: string): void {
  for (const f of secretForms) assert.ok(!text.includes(f), `"${f}" leaked in: ${text}`);
}

describe('proxy failures', () => {
  let sim: ChargingServiceSimulator;
  let proxy: TestProxy | null = null;
  let client: ServiceClient | null = null;
  const make = (extra: Partial<ServiceClientOptions>) => clientFor(sim, { ...fast, ...extra });
  afterEach(async () => {
    await client?.close();
    client = null;
    await proxy?.stop();
    proxy = null;
    await sim?.stop();
  });

  describe('407 with a page that lists the request headers', () => {
    it('plain http: the message names the proxy, START is NETWORK, and no form of the credentials shows', async () => {
      sim = await startSimulator();
      // The proxy wants other credentials than ours, and echoes ours back in its page.
      proxy = await new TestProxy({ requireAuth: 'Basic c29tZW9uZTplbHNl' }).start();
      client = make({ proxy: `http://${USER}:${ENCODED}@127.0.0.1:${proxy.port}`, authUrl: sim.authUrl });
      const err = (await rejection(client.sendCommand(start))) as ChargingError;
      assert.ok(proxy.seen.length > 0, 'went through the proxy');
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.match(err.message, /proxy/);
      assert.match(err.message, /407/);
      assertNoProxySecret(err.message);
      assertNoProxySecret(JSON.stringify(err));
      assert.equal(sim.requests.length, 0, 'nothing reached the service');
    });

    it('a 407 to the START (token fetched directly): NETWORK, not OUTCOME_UNKNOWN, not sent again, no form of the credentials', async () => {
      sim = await startSimulator();
      const tokenSim = await startSimulator();
      proxy = await new TestProxy({ requireAuth: 'Basic c29tZW9uZTplbHNl' }).start();
      const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY };
      process.env.HTTP_PROXY = `http://${USER}:${ENCODED}@127.0.0.1:${proxy.port}`;
      process.env.NO_PROXY = `127.0.0.1:${tokenSim.options.port}`;
      try {
        client = clientFor(sim, { ...fast, authUrl: tokenSim.authUrl });
        const err = (await rejection(client.sendCommand(start))) as ChargingError;
        assert.equal(tokenSim.counters.tokensIssued, 1, 'the token came directly');
        // Plain http goes to the proxy in absolute form: the 407 answers the START itself, and its page (which echoes our credentials) is never read.
        assert.deepEqual(proxy.seen, [`POST http://127.0.0.1:${sim.options.port}/poi/v1/charging-sessions`], 'one request, not sent again');
        assert.equal(err.code, 'NETWORK', err.message);
        assert.equal(err.outcomeUnknown, false);
        assert.match(err.message, new RegExp(`^START: the proxy http://127\\.0\\.0\\.1:${proxy.port} refused the request: 407 Proxy Authentication Required`));
        assertNoProxySecret(err.message);
        assertNoProxySecret(err.serviceMessage ?? '');
        assert.equal(sim.requests.length, 0);
      } finally {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
        await tokenSim.stop();
      }
    });

    it('https (CONNECT): names the proxy, NETWORK, not retried, START not OUTCOME_UNKNOWN', async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      proxy = await new TestProxy({ requireAuth: 'Basic c29tZW9uZTplbHNl' }).start();
      client = make({ proxy: `http://${USER}:${ENCODED}@127.0.0.1:${proxy.port}`, tls: { ca: SIM_CERT } });
      const err = (await rejection(client.sendCommand(start))) as ChargingError;
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.match(err.message, new RegExp(`the proxy http://127\\.0\\.0\\.1:${proxy.port} refused the request: 407 Proxy Authentication Required`));
      assertNoProxySecret(err.message);
      assert.equal(proxy.seen.length, 1, 'not retried');
    });
  });

  it('a CONNECT answered 502 names the proxy; START is NETWORK, not OUTCOME_UNKNOWN', async () => {
    sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
    proxy = await new TestProxy({ connectStatus: 502 }).start();
    const tokenSim = await startSimulator(); // a token endpoint reached directly (NO_PROXY)
    const saved = { HTTPS_PROXY: process.env.HTTPS_PROXY, HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY };
    process.env.HTTPS_PROXY = process.env.HTTP_PROXY = proxy.url;
    process.env.NO_PROXY = `127.0.0.1:${tokenSim.options.port}`;
    try {
      client = clientFor(sim, { ...fast, authUrl: tokenSim.authUrl, tls: { ca: SIM_CERT }, retry: { ...fast.retry, postAttempts: 1 } });
      const err = (await rejection(client.sendCommand(start))) as ChargingError;
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.match(err.message, new RegExp(`the proxy http://127\\.0\\.0\\.1:${proxy.port} answered 502 to CONNECT.*nothing reached https://127\\.0\\.0\\.1`));
    } finally {
      restoreEnv(saved);
      await tokenSim.stop();
    }
  });

  it('a proxy that closes the connection without answering CONNECT: NETWORK naming the proxy, at once rather than at the timeout', async () => {
    sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
    proxy = await new TestProxy({ connectStatus: 0 }).start();
    client = clientFor(sim, { ...fast, timeoutMs: 20_000, proxy: proxy.url, tls: { ca: SIM_CERT }, retry: { ...fast.retry, tokenAttempts: 1 } });
    const err = (await rejection(client.getProgress('RFID-1'))) as ChargingError;
    assert.equal(err.code, 'NETWORK', err.message);
    assert.match(err.message, new RegExp(`the proxy http://127\\.0\\.0\\.1:${proxy.port} gave no valid answer to CONNECT`));
    assert.doesNotMatch(err.message, /within 20000 ms/);
  });

  it('a proxy that is down: NETWORK naming the proxy for START and for the token endpoint', async () => {
    sim = await startSimulator();
    const port = await freePort();
    client = make({ proxy: `http://${USER}:${ENCODED}@127.0.0.1:${port}`, retry: { ...fast.retry, postAttempts: 1, tokenAttempts: 1 } });
    const err = (await rejection(client.sendCommand(start))) as ChargingError;
    assert.equal(err.code, 'NETWORK', err.message);
    assert.equal(err.outcomeUnknown, false);
    assert.match(err.message, new RegExp(`could not connect to the proxy http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`));
    assert.doesNotMatch(err.message, /Authentication failed/);
    assertNoProxySecret(err.message);
  });
});

describe('NO_PROXY (proxy-env.ts)', () => {
  const env = (noProxy: string) => ({ HTTPS_PROXY: 'http://proxy:3128', HTTP_PROXY: 'http://proxy:3128', NO_PROXY: noProxy });
  const cases: Array<[string, string, boolean]> = [
    ['127.0.0.0/8', 'http://127.0.0.1:8080/x', true],
    ['127.0.0.0/8', 'http://127.255.3.4/x', true],
    ['127.0.0.0/8', 'http://128.0.0.1/x', false],
    ['10.0.0.0/8', 'https://10.20.30.40/x', true],
    ['10.0.0.0/8', 'https://11.0.0.1/x', false],
    ['192.168.1.0/24', 'https://192.168.1.77/x', true],
    ['192.168.1.0/24', 'https://192.168.2.77/x', false],
    ['::1', 'http://[::1]:1880/x', true],
    ['[::1]', 'http://[::1]:1880/x', true],
    ['[::1]:1880', 'http://[::1]:1880/x', true],
    ['[::1]:1880', 'http://[::1]:1881/x', false],
    ['fd00::/8', 'https://[fd12:3456::1]/x', true],
    ['fd00::/8', 'https://[fe80::1]/x', false],
    ['0:0:0:0:0:0:0:1', 'http://[::1]/x', true],
    ['example.com', 'https://api.example.com/x', true],
    ['.example.com', 'https://api.example.com/x', true],
    ['example.com', 'https://notexample.com/x', false],
    ['example.com:8443', 'https://example.com:8443/x', true],
    ['example.com:8443', 'https://example.com/x', false],
    ['localhost, 10.0.0.0/8 ,.corp', 'https://svc.corp/x', true],
    ['*', 'https://anything.example/x', true],
    ['10.0.0.0/8', 'https://[::ffff:10.0.0.1]/x', true],
    ['10.0.0.0/8', 'https://[::ffff:11.0.0.1]/x', false],
    ['example.com', 'https://api.example.com./x', true],
    ['example.com.', 'https://api.example.com/x', true],
    ['.example.com', 'https://example.com./x', true],
    ['', 'https://anything.example/x', false],
  ];
  for (const [noProxy, url, direct] of cases) {
    it(`NO_PROXY="${noProxy}" ${direct ? 'exempts' : 'does not exempt'} ${url}`, () => {
      assert.equal(proxyForUrl(url, env(noProxy)), direct ? '' : 'http://proxy:3128');
    });
  }

  it('lower case variables first, ALL_PROXY as fallback, a proxy without scheme is http', () => {
    assert.equal(proxyForUrl('https://a.example/', { https_proxy: 'http://low:1', HTTPS_PROXY: 'http://up:1' }), 'http://low:1');
    assert.equal(proxyForUrl('https://a.example/', { ALL_PROXY: 'proxy:3128' }), 'http://proxy:3128');
    assert.equal(proxyForUrl('http://a.example/', { HTTPS_PROXY: 'http://p:1' }), '');
    assert.equal(noProxyMatches('10.0.0.0/33', '10.0.0.1', 80), false, 'an impossible prefix matches nothing');
  });

  it('an entry that cannot mean anything is reported, not ignored in silence', () => {
    const warnings: string[] = [];
    assert.equal(noProxyMatches('10.1.2.3/33, fd00::/129, exa mple.com, 10.0.0.0/8', '10.1.2.3', 443, (w) => warnings.push(w)), true, 'the valid entry still applies');
    assert.equal(warnings.length, 2, warnings.join('; '));
    assert.match(warnings[0], /NO_PROXY entry "10\.1\.2\.3\/33" is not a host name, an IP address or a CIDR block/);
    assert.match(warnings[1], /"fd00::\/129"/);
  });

  it('a client warns once about such an entry', async () => {
    const sim = await startSimulator();
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY };
    process.env.HTTP_PROXY = 'http://127.0.0.1:1';
    process.env.NO_PROXY = '10.1.2.3/33,127.0.0.1';
    const warnings: string[] = [];
    const client = clientFor(sim, { ...fast, onWarning: (w) => warnings.push(w) });
    try {
      await client.getProgress('nobody');
      assert.deepEqual(warnings, ['NO_PROXY entry "10.1.2.3/33" is not a host name, an IP address or a CIDR block (such as 10.0.0.0/8); it is ignored']);
    } finally {
      restoreEnv(saved);
      await client.close();
      await sim.stop();
    }
  });

  describe('proxy settings that cannot work are CONFIG errors naming the variable, never the password', () => {
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ['a literal % in the password', { HTTPS_PROXY: 'http://corp-user:50%off@proxy.example:3128' }, /The user or password in HTTPS_PROXY \(proxy http:\/\/proxy\.example:3128\) is not valid percent-encoding: write a literal % as %25/],
      ['a SOCKS proxy in ALL_PROXY', { ALL_PROXY: 'socks5h://corp-user:50%off@socks.example:1080' }, /ALL_PROXY names a socks5h:\/\/ proxy \(socks\.example:1080\): only http:\/\/ and https:\/\/ proxies are supported/],
      ['a SOCKS proxy in https_proxy', { https_proxy: 'socks5://socks.example:1080' }, /https_proxy names a socks5:\/\/ proxy/],
    ];
    for (const [what, env, words] of cases) {
      it(what, () => {
        const saved: Record<string, string | undefined> = {};
        for (const k of ['HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy', 'NO_PROXY', 'no_proxy']) {
          saved[k] = process.env[k];
          delete process.env[k];
        }
        Object.assign(process.env, env);
        try {
          let thrown: unknown;
          try {
            new ServiceClient({ baseUrl: 'https://service.example', authUrl: 'https://auth.example', clientId: 'id', clientSecret: 'secret' });
          } catch (e) {
            thrown = e;
          }
          assert.ok(thrown instanceof ChargingError, String(thrown));
          assert.equal(thrown.code, 'CONFIG');
          assert.match(thrown.message, words);
          assert.ok(!thrown.message.includes('50%off') && !thrown.message.includes('corp-user'), thrown.message);
        } finally {
          restoreEnv(saved);
        }
      });
    }
  });

  it('end to end: NO_PROXY=127.0.0.0/8 sends nothing through HTTP_PROXY', async () => {
    const sim = await startSimulator();
    const proxy = await new TestProxy().start();
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY };
    process.env.HTTP_PROXY = proxy.url;
    process.env.NO_PROXY = '127.0.0.0/8';
    const client = clientFor(sim, fast);
    try {
      await client.getProgress('nobody');
      assert.deepEqual(proxy.seen, []);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await client.close();
      await proxy.stop();
      await sim.stop();
    }
  });
});
