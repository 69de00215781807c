import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import axios from 'axios';
import path from 'node:path';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { startSimulator, clientFor as harnessClient } from '../../harness';
import { TestProxy } from '../../proxy-server';

const FIXTURES = path.join(__dirname, '..', '..', '..', '..', 'test', 'fixtures');
export const SIM_CERT = fs.readFileSync(path.join(FIXTURES, 'sim-cert.pem'));
export const SIM_KEY = fs.readFileSync(path.join(FIXTURES, 'sim-key.pem'));

function clientFor(sim: ChargingServiceSimulator, extra: Partial<ServiceClientOptions> = {}): ServiceClient {
  return harnessClient(sim, { timeoutMs: 2000, ...extra });
}

const PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'ALL_PROXY', 'all_proxy'];

describe('transport: TLS and proxies', () => {
  const saved: Record<string, string | undefined> = {};
  let sim: ChargingServiceSimulator;
  let client: ServiceClient | null = null;
  beforeEach(() => {
    for (const v of PROXY_VARS) {
      saved[v] = process.env[v];
      delete process.env[v];
    }
  });
  afterEach(async () => {
    await client?.close();
    client = null;
    await sim?.stop();
    for (const v of PROXY_VARS) {
      if (saved[v] === undefined) delete process.env[v];
      else process.env[v] = saved[v];
    }
  });

  describe('TLS', () => {
    it('refuses a certificate from an unknown CA with an error that says how to fix it', async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      client = clientFor(sim);
      assert.match(sim.baseUrl, /^https:/);
      await assert.rejects(client.getProgress('x'), (e: ChargingError) => {
        assert.equal(e.code, 'NETWORK');
        assert.match(e.message, /TLS handshake failed \(DEPTH_ZERO_SELF_SIGNED_CERT\): .*set that certificate or its CA as the CA in a TLS configuration/);
        return true;
      });
    });

    it('works with the private CA given as TLS options', async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      client = clientFor(sim, { tls: { ca: SIM_CERT } });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
    });
  });

  describe('proxy from the environment', () => {
    let proxy: TestProxy;
    beforeEach(async () => {
      proxy = await new TestProxy().start();
    });
    afterEach(async () => {
      await proxy.stop();
    });

    it('sends plain http to HTTP_PROXY as absolute-form requests, as curl does, so that a proxy allowing CONNECT to 443 only (Squid) serves it', async () => {
      sim = await startSimulator();
      const squid = await new TestProxy({ connectOnlyTo443: true }).start();
      try {
        process.env.HTTP_PROXY = squid.url;
        client = clientFor(sim);
        const res = await client.getProgress('nobody');
        assert.equal(res.record, null);
        const base = `http://127.0.0.1:${sim.options.port}/`;
        assert.equal(squid.seen.length, 2, squid.seen.join());
        assert.ok(squid.seen[0].startsWith(`POST ${base}`) && squid.seen[0].endsWith('/v1/token'), squid.seen[0]);
        assert.equal(squid.seen[1], `GET ${base}poi/v1/charging-sessions?token=nobody`);
        assert.equal(sim.counters.tokenRequests, 1, 'the token request went through the proxy');
      } finally {
        await squid.stop();
      }
    });

    it('passes the proxy its credentials on plain http requests, and a 407 is the proxy\'s refusal: NETWORK, naming the proxy, nothing reached the service', async () => {
      sim = await startSimulator();
      const auth = `Basic ${Buffer.from('user:pa:ss').toString('base64')}`;
      const guarded = await new TestProxy({ requireAuth: auth }).start();
      try {
        process.env.HTTP_PROXY = `http://user:pa%3Ass@127.0.0.1:${guarded.port}`;
        client = clientFor(sim);
        assert.equal((await client.getProgress('nobody')).record, null);
        await client.close();
        process.env.HTTP_PROXY = `http://user:wrong@127.0.0.1:${guarded.port}`;
        client = clientFor(sim, { tokenCache: { failureBackoffMs: 1 } });
        const before = sim.requests.length;
        const err = (await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'T' }).catch((e: unknown) => e)) as ChargingError;
        assert.equal(err.code, 'NETWORK', err.message);
        assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${guarded.port}`));
        assert.equal(sim.requests.length, before, 'nothing reached the service or its token endpoint');
      } finally {
        await guarded.stop();
      }
    });

    it('goes direct for hosts in NO_PROXY', async () => {
      sim = await startSimulator();
      process.env.HTTP_PROXY = proxy.url;
      process.env.NO_PROXY = '127.0.0.1';
      client = clientFor(sim);
      await client.getProgress('nobody');
      assert.deepEqual(proxy.seen, []);
    });

    it('tunnels https through HTTPS_PROXY with CONNECT, verifying the private CA end to end', async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      process.env.HTTPS_PROXY = proxy.url;
      client = clientFor(sim, { tls: { ca: SIM_CERT } });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
      assert.ok(proxy.seen.every((s) => s === `CONNECT 127.0.0.1:${sim.options.port}`), proxy.seen.join());
      assert.ok(proxy.seen.length >= 1);
    });

    it('keeps tunnels alive and bounded: 20 queries, 4 at a time, open no more tunnels than Max in flight (4)', async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      process.env.HTTPS_PROXY = proxy.url;
      client = clientFor(sim, { tls: { ca: SIM_CERT }, maxInFlight: 4 });
      await client.getProgress('warm-up'); // one tunnel for the token, one for the service (same host: shared pool)
      const before = proxy.seen.length;
      for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 4 }, (_, i) => client!.getProgress(`T${round}-${i}`)));
      // Without keep-alive through the tunnel, each of the 20 queries would open its own CONNECT tunnel and TLS session.
      assert.ok(proxy.seen.length - before <= 4, `${proxy.seen.length - before} new tunnels for 20 queries`);
    });

    it("axios's own proxy support keeps the private CA but opens a tunnel per request: why the proxy agents are hpagent's", async () => {
      sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
      const agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: SIM_CERT });
      const ax = axios.create({ httpsAgent: agent, proxy: { protocol: 'http', host: '127.0.0.1', port: proxy.port }, validateStatus: () => true });
      try {
        for (let i = 0; i < 5; i++) {
          const res = await ax.get(`${sim.baseUrl}/poi/v1/charging-sessions?token=T${i}`);
          assert.equal(res.status, 401, 'reached the service through the tunnel, private CA verified');
        }
      } finally {
        agent.destroy();
      }
      // Measured with axios 1.21: one CONNECT (and TLS handshake) per request. Our agents pool tunnels
      // (the keep-alive test above: at most Max in flight tunnels for 20 queries).
      assert.equal(proxy.seen.filter((x) => x.startsWith('CONNECT')).length, 5);
    });

    it('never shows the proxy password in an error', async () => {
      sim = await startSimulator();
      client = clientFor(sim, { proxy: 'http://user:Pr0xy-Pa55@127.0.0.1:1', retry: { getAttempts: 1 } });
      await assert.rejects(client.getProgress('x'), (e: ChargingError) => {
        assert.ok(!e.message.includes('Pr0xy-Pa55'));
        assert.equal(e.code, 'NETWORK');
        assert.match(e.message, /could not connect to the proxy http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/);
        return true;
      });
    });
  });
});
