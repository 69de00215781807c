/**
 * Every TLS handshake failure is a NETWORK error that is not retried, never
 * OUTCOME_UNKNOWN (the request is written only after the handshake), and its
 * message names the real cause. Certificates are made at test time (tls-certs.ts).
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import net from 'node:net';
import { ServiceClient, ServiceClientOptions } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, rejection, startSimulator } from '../../harness';
import { testCerts } from './tls-certs';

const start = { action: 'START' as const, locationId: 'LOC-1', evseId: '1', token: 'RFID-1' };
const fast = { timeoutMs: 2000, retry: { baseDelayMs: 10, maxDelayMs: 20, maxTotalMs: 5000 } };

/** A port that speaks plain http (answers every connection with a 400), counting connections. */
async function plainHttpPort(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    n++;
    sockets.add(s);
    s.on('error', () => undefined);
    s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => n,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('TLS handshake failures', () => {
  let sim: ChargingServiceSimulator | null = null;
  let client: ServiceClient | null = null;
  afterEach(async () => {
    await client?.close();
    client = null;
    await sim?.stop();
    sim = null;
  });

  describe('https to a port that speaks plain http', () => {
    let plain: Awaited<ReturnType<typeof plainHttpPort>>;
    beforeEach(async () => {
      plain = await plainHttpPort();
      sim = await startSimulator(); // the token endpoint, over http
    });
    afterEach(() => plain.close());
    const make = (extra: Partial<ServiceClientOptions> = {}) => clientFor(sim!, { ...fast, baseUrl: `https://127.0.0.1:${plain.port}`, ...extra });

    it('a START is NETWORK with "plain http" in its hint, never OUTCOME_UNKNOWN: nothing was sent', async () => {
      client = make();
      const err = await rejection(client.sendCommand(start));
      assert.ok(err instanceof ChargingError);
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.match(err.message, /TLS handshake .* failed \(.+\): the server did not speak TLS on this port \(plain http on an https port\?\)/);
      assert.equal(plain.connections(), 1, 'not sent again');
    });

    it('a progress query is not retried', async () => {
      client = make();
      const err = await rejection(client.getProgress('RFID-1'));
      assert.equal((err as ChargingError).code, 'NETWORK');
      assert.equal(plain.connections(), 1, (err as Error).message);
    });

    it('a token endpoint on such a port says TLS, not "authentication failed"', async () => {
      client = clientFor(sim!, { ...fast, authUrl: `https://127.0.0.1:${plain.port}` });
      const err = (await rejection(client.getProgress('RFID-1'))) as ChargingError;
      assert.equal(err.code, 'NETWORK', err.message);
      assert.doesNotMatch(err.message, /Authentication failed/);
      assert.match(err.message, /access token .* TLS handshake failed .*plain http/);
    });
  });

  describe('certificate problems name their cause', () => {
    const certs = testCerts();
    const cases: Array<{ name: string; cert: Buffer; ca?: Buffer; code: RegExp; hint: RegExp }> = [
      { name: 'expired', cert: certs.expiredCert, ca: certs.caCert, code: /CERT_HAS_EXPIRED/, hint: /has expired/ },
      { name: 'host name not in the certificate', cert: certs.wrongNameCert, ca: certs.caCert, code: /ERR_TLS_CERT_ALTNAME_INVALID/, hint: /host name in the URL is not one the certificate was issued for/ },
      { name: 'unknown CA (CA file missing)', cert: certs.serverCert, code: /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY/, hint: /issuer is not known here: set the CA certificate/ },
      { name: 'self-signed', cert: certs.caCert, code: /DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN/, hint: /self-signed certificate/ },
    ];
    for (const c of cases) {
      it(`${c.name}: NETWORK, hint "${c.hint.source.slice(0, 30)}…", nothing reaches the service`, async () => {
        // The self-signed case serves the CA's own certificate with its key.
        const key = c.cert === certs.caCert ? certs.caKey : certs.serverKey;
        sim = await startSimulator({ tls: { key, cert: c.cert } });
        const tokenSim = sim;
        client = clientFor(tokenSim, { ...fast, tls: c.ca ? { ca: c.ca } : undefined });
        const err = (await rejection(client.getProgress('RFID-1'))) as ChargingError;
        assert.equal(err.code, 'NETWORK', err.message);
        assert.match(err.message, c.code);
        assert.match(err.message, c.hint);
        assert.doesNotMatch(err.message, /Authentication failed/);
        assert.equal(sim.requests.length, 0, 'nothing reached the service');
      });
    }
  });

  it('a server that requires a client certificate: the hint says so; with the certificate it works', async () => {
    const certs = testCerts();
    sim = await startSimulator(); // token endpoint
    const server = https.createServer({ key: certs.serverKey, cert: certs.serverCert, ca: certs.caCert, requestCert: true, rejectUnauthorized: true }, (_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const baseUrl = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    try {
      client = clientFor(sim, { ...fast, baseUrl, tls: { ca: certs.caCert } });
      const err = (await rejection(client.sendCommand(start))) as ChargingError;
      assert.equal(err.code, 'NETWORK', err.message);
      assert.equal(err.outcomeUnknown, false);
      assert.match(err.message, /client certificate/);
      await client.close();
      client = clientFor(sim, { ...fast, baseUrl, tls: { ca: certs.caCert, cert: certs.clientCert, key: certs.clientKey } });
      const res = await client.getProgress('nobody');
      assert.equal(res.record, null);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
