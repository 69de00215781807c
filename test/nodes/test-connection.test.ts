/**
 * Test connection with the stored (not retyped) secret: the token it buys is a
 * live credential, so it is sent only to the deployed Base URL (or a `${NAME}`
 * one); for any other Base URL the answer says why the service was not probed.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { helper, load, startSimulator, CLIENT_ID, runtimeSuite } from '../harness';

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [[]] };

describe('Test connection: where a token from the stored secret may go', () => {
  const rt = runtimeSuite();

  it('does not send it to a Base URL other than the deployed one, and says why it did not probe', async () => {
    await load(rt.sim, [PROGRESS]);
    const seen: string[] = [];
    const elsewhere = http.createServer((req, res) => {
      seen.push(String(req.headers.authorization));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', () => r()));
    try {
      const baseUrl = `http://127.0.0.1:${(elsewhere.address() as net.AddressInfo).port}`;
      const res = await helper.request().post('/charging-service/test').send({ id: 'svc', baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' }).expect(200);
      assert.deepEqual(seen, [], 'no request, no token, reached the other host');
      assert.equal(res.body.probed, false);
      assert.match(res.body.message, /token received .*The service was not probed: a token issued for the stored secret is only sent to the deployed Base URL/);
      assert.equal(rt.sim.counters.tokensIssued, 1, 'the deployed token URL was asked');
    } finally {
      elsewhere.closeAllConnections();
      await new Promise<void>((r) => elsewhere.close(() => r()));
    }
  });

  it('probes the deployed Base URL with the stored secret', async () => {
    await load(rt.sim, [PROGRESS]);
    const res = await helper.request().post('/charging-service/test').send({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' }).expect(200);
    assert.equal(res.body.ok, true, res.body.message);
    assert.notEqual(res.body.probed, false);
    assert.equal(rt.sim.counters.progressQueries, 1);
  });

  it('probes a Base URL given as ${NAME} (set by whoever runs Node-RED)', async () => {
    await load(rt.sim, [PROGRESS]);
    const other = await startSimulator();
    process.env.CHARGING_TEST_PROBE_URL = other.baseUrl;
    try {
      const res = await helper
        .request()
        .post('/charging-service/test')
        .send({ id: 'svc', baseUrl: '${CHARGING_TEST_PROBE_URL}', authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' })
        .expect(200);
      assert.notEqual(res.body.probed, false, res.body.message);
      assert.ok(other.requests.length >= 1, 'the environment-named service was probed');
    } finally {
      delete process.env.CHARGING_TEST_PROBE_URL;
      await other.stop();
    }
  });
});
