/**
 * What the well-kept agents bring (agents.ts): TLS session resumption for
 * commands, each on a connection of its own, directly and through a proxy; an
 * https:// proxy verified with the TLS configuration's CA; and the token taken
 * when a request is sent, not when it was queued.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { ServiceClient } from '../../../nodes/lib/client/service-client';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, rejection, startSimulator } from '../../harness';
import { TestProxy } from '../../proxy-server';
import { testCerts } from './tls-certs';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };

/** An https service that accepts every command, noting for each TLS connection whether its session was resumed. */
async function commandServer(): Promise<{ url: string; resumed: boolean[]; close: () => Promise<void> }> {
  const certs = testCerts();
  const resumed: boolean[] = [];
  const server = https.createServer({ key: certs.serverKey, cert: certs.serverCert }, (req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(202, { 'content-type': 'application/json' }).end('{}'));
  });
  server.on('secureConnection', (socket: TLSSocket) => resumed.push(socket.isSessionReused()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    resumed,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('agents: TLS sessions, https proxies, fresh tokens', () => {
  let sim: ChargingServiceSimulator | null = null;
  let proxy: TestProxy | null = null;
  let client: ServiceClient | null = null;
  afterEach(async () => {
    await client?.close();
    client = null;
    await proxy?.stop();
    proxy = null;
    await sim?.stop();
    sim = null;
  });

  for (const through of ['directly', 'through a CONNECT proxy']) {
    it(`a second START on a fresh connection resumes the TLS session (${through})`, async () => {
      const service = await commandServer();
      try {
        sim = await startSimulator(); // the token endpoint
        if (through !== 'directly') proxy = await new TestProxy().start();
        client = clientFor(sim, { baseUrl: service.url, tls: { ca: testCerts().caCert }, proxy: proxy ? proxy.url : false });
        for (let i = 0; i < 3; i++) await client.sendCommand(start);
        assert.equal(service.resumed.length, 3, 'each command on a connection of its own');
        assert.deepEqual(service.resumed, [false, true, true]);
        if (proxy) assert.equal(proxy.seen.filter((s) => s.startsWith(`CONNECT 127.0.0.1:${new URL(service.url).port}`)).length, 3);
      } finally {
        await service.close();
      }
    });
  }

  it("an https:// proxy is verified with the TLS configuration's CA", async () => {
    const certs = testCerts();
    sim = await startSimulator({ tls: { key: certs.serverKey, cert: certs.serverCert } });
    proxy = await new TestProxy({ tls: { key: certs.serverKey, cert: certs.serverCert } }).start();
    assert.match(proxy.url, /^https:/);
    client = clientFor(sim, { tls: { ca: certs.caCert }, proxy: proxy.url });
    assert.equal((await client.getProgress('nobody')).record, null);
    assert.ok(proxy.seen.length >= 1 && proxy.seen.every((s) => s.startsWith('CONNECT ')), proxy.seen.join());
    await client.close();
    // Without the CA, the proxy's own certificate is refused, and the message says which TLS connection failed.
    client = clientFor(sim, { proxy: proxy.url, retry: { tokenAttempts: 1 } });
    const err = await rejection(client.getProgress('nobody'));
    assert.equal(err.code, 'NETWORK', err.message);
    assert.match(err.message, new RegExp(`the TLS handshake with the proxy https://127\\.0\\.0\\.1:${proxy.port} failed \\(UNABLE_TO_VERIFY_LEAF_SIGNATURE\\)`));
  });

  it('a request that waited longer than its token lives is sent with a fresh token: no 401 round trip', async () => {
    // Tokens live 1 s; the only slot is held 1.2 s by a query the service never answers.
    sim = await startSimulator({ tokenLifetimeSec: 1 });
    client = clientFor(sim, { maxInFlight: 1, timeoutMs: 1200, retry: { getAttempts: 1, maxTotalMs: 5000 }, tokenCache: { minLifetimeMs: 500 } });
    await client.getProgress('warm-up');
    sim.inject({ target: 'get', kind: 'hang', times: 1 });
    const stalled = rejection(client.getProgress('stalled'));
    await new Promise((r) => setTimeout(r, 20));
    const queued = client.getProgress('queued'); // queued behind it with a token that is still good
    assert.equal((await stalled).code, 'TIMEOUT');
    assert.equal((await queued).record, null);
    assert.equal(sim.counters.unauthorized, 0, 'the expired token was never sent');
    assert.equal(sim.counters.tokensIssued, 2);
  });
});
