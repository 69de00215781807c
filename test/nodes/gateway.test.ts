/** API key and token parameters through the real runtime: sent where they belong, refused when malformed, never shown. */
import assert from 'node:assert/strict';
import { helper, load, Sink, send, CLIENT_ID, CLIENT_SECRET, loggedText, assertNoSecret, runtimeSuite } from '../harness';
import { SESSIONS_PATH, TOKEN_PATH } from '../../simulator/simulator';

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const API_KEY = 'gw-Key-Runtime-5f3a9c';

describe('charging-service: API key and token parameters', () => {
  const rt = runtimeSuite();

  it('sends the API key (from ${NAME}) in apiKeyHeader to the service only; never in a msg or the log', async () => {
    process.env.CHARGING_TEST_API_KEY = API_KEY;
    try {
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], { apiKeyHeader: 'x-gateway-key', tokenParams: 'audience=https%3A%2F%2Fapi.example.com' }, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, apiKey: '${CHARGING_TEST_API_KEY}' } });
      send('progress', { payload: { token: 'T' } });
      const msg = await Sink.of('out').next();
      assert.equal(msg.payload, null);
      const service = rt.sim.requests.find((r) => r.path === SESSIONS_PATH);
      assert.equal(service?.headers['x-gateway-key'], API_KEY);
      const token = rt.sim.requests.find((r) => r.path === TOKEN_PATH);
      assert.equal(new URLSearchParams(token?.body).get('audience'), 'https://api.example.com');
      assert.ok(!JSON.stringify(token?.headers).includes(API_KEY));
      assertNoSecret(JSON.stringify(msg) + loggedText(), [API_KEY], 'a msg or the log');
    } finally {
      delete process.env.CHARGING_TEST_API_KEY;
    }
  });

  for (const [tokenParams, said] of [
    ['audience', /is not a key=value pair/],
    ['grant_type=password', /may not set grant_type/],
  ] as const) {
    it(`tokenParams "${tokenParams}" is a CONFIG error on each message; nothing is sent`, async () => {
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], { tokenParams });
      for (let i = 0; i < 2; i++) {
        send('progress', { payload: { token: 'T' } });
        const caught = await Sink.of('caught').next();
        const error = caught.error as { code: string; message: string };
        assert.equal(error.code, 'CONFIG');
        assert.match(error.message, said);
      }
      assert.equal(rt.sim.requests.length, 0);
    });
  }

  it('Test connection uses the stored API key against the deployed Base URL, and not elsewhere', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS], { apiKeyHeader: 'x-gateway-key' }, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, apiKey: API_KEY } });
    const res = await helper
      .request()
      .post('/charging-service/test')
      .send({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, apiKeyHeader: 'x-gateway-key', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, apiKey: '__PWRD__' })
      .expect(200);
    assert.equal(res.body.ok, true, res.body.message);
    assert.equal(rt.sim.requests.find((r) => r.path === SESSIONS_PATH)?.headers['x-gateway-key'], API_KEY);
    assert.ok(!res.text.includes(API_KEY));
    const before = rt.sim.requests.length;
    // The secret is retyped but the key is not: the key may still only go to the deployed Base URL.
    const other = await helper
      .request()
      .post('/charging-service/test')
      .send({ id: 'svc', baseUrl: 'http://127.0.0.1:1', authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, apiKey: '__PWRD__' })
      .expect(200);
    assert.equal(other.body.probed, false, other.body.message);
    assert.match(other.body.message, /the stored API key is only sent to the deployed Base URL/);
    assert.equal(rt.sim.requests.slice(before).filter((r) => r.path === SESSIONS_PATH).length, 0);
  });
});
