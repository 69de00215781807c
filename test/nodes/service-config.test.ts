import assert from 'node:assert/strict';
import path from 'node:path';
import { helper, load, Sink, send, startSimulator, CLIENT_ID, CLIENT_SECRET, loggedText, assertNoSecret, NODES, flowFor, fromNodeRed, runtimeSuite } from '../harness';
import { SIM_CERT, SIM_KEY } from '../lib/client/transport.test';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const TLS_NODE = require(fromNodeRed('@node-red/nodes/core/network/05-tls.js'));
const CA_FILE = path.join(__dirname, '..', '..', '..', 'test', 'fixtures', 'sim-cert.pem');

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

describe('charging-service configuration', () => {
  const rt = runtimeSuite();

  describe('Test connection (admin endpoint)', () => {
    it('fetches a token with the values posted and answers ok, without the token or the secret', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const res = await helper
        .request()
        .post('/charging-service/test')
        .send({ baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, scope: '', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET })
        .expect(200);
      assert.equal(res.body.ok, true);
      assert.equal(res.body.expiresIn, 1800);
      assert.match(res.body.message, /^Connected: token received \(valid 1800 s\); the service at http:\/\/127\.0\.0\.1:\d+ answers/);
      assert.equal(rt.sim.counters.tokensIssued, 1);
      assert.equal(rt.sim.counters.progressQueries, 1, 'the service itself was asked, not only the token endpoint');
      assert.ok(!res.text.includes(CLIENT_SECRET));
    });

    it('uses the stored secret when the editor sends the unchanged-password placeholder', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const res = await helper
        .request()
        .post('/charging-service/test')
        .send({ id: 'svc', baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' })
        .expect(200);
      assert.equal(res.body.ok, true);
    });

    it('never sends the stored secret to a token URL other than the deployed one', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const elsewhere = await startSimulator();
      try {
        const res = await helper
          .request()
          .post('/charging-service/test')
          .send({ id: 'svc', baseUrl: elsewhere.baseUrl, authUrl: elsewhere.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' })
          .expect(200);
        assert.equal(res.body.ok, false);
        assert.match(res.body.error, /Retype the client secret/);
        assert.equal(elsewhere.requests.length, 0, 'nothing reached the other host');
      } finally {
        await elsewhere.stop();
      }
    });

    it('reports the reason for a refusal, without echoing the secret', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const res = await helper
        .request()
        .post('/charging-service/test')
        .send({ baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: 'Not-The-Secret-42' })
        .expect(200);
      assert.equal(res.body.ok, false);
      assert.match(res.body.error, /Authentication failed: .* answered 401/);
      assert.ok(!res.text.includes('Not-The-Secret-42'));
    });

    it('refuses plain http to a remote host unless allowed', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const res = await helper
        .request()
        .post('/charging-service/test')
        .send({ baseUrl: 'http://charging.example.com', authUrl: 'http://auth.example.com', clientId: 'a', clientSecret: 'b' })
        .expect(200);
      assert.equal(res.body.ok, false);
      assert.match(res.body.error, /plain http/);
    });
  });

  it('a configuration with http to a remote host fails every message with a CONFIG error, and sends nothing', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH], { baseUrl: 'http://charging.example.com', authUrl: 'http://auth.example.com' });
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    const error = caught.error as { code: string; message: string };
    assert.equal(error.code, 'CONFIG');
    assert.match(error.message, /Base URL uses plain http to a host other than this machine/);
    assert.doesNotMatch(error.message, /charging\.example\.com/, 'no part of the value in the error');
  });

  it('talks https to a private-CA service through a tls-config node', async () => {
    await rt.sim.stop();
    rt.sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
    const f = flowFor(rt.sim, [PROGRESS, ...SINKS, CATCH], { tls: 'tlsconf' });
    // A global config node, as the editor makes it.
    f.flow.push({ id: 'tlsconf', type: 'tls-config', cert: '', key: '', ca: CA_FILE, verifyservercert: true });
    await helper.load([...NODES, TLS_NODE], f.flow, f.credentials);
    send('progress', { payload: { token: 'T' } });
    const msg = await Sink.of('out').next();
    assert.equal(msg.payload, null);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('without the tls-config node the same service is refused with a hint', async () => {
    await rt.sim.stop();
    rt.sim = await startSimulator({ tls: { key: SIM_KEY, cert: SIM_CERT } });
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    assert.match((caught.error as { message: string }).message, /TLS handshake failed \(DEPTH_ZERO_SELF_SIGNED_CERT\): .*self-signed.* set that certificate or its CA as the CA in a TLS configuration/);
  });

  it('declares the secret, the API key and the Redis URL of Coordinate replicas (it may hold a password) as password credentials, so the editor never gets it back and exports leave it out', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    const redNodes = (helper as unknown as { _redNodes: { getCredentialDefinition(type: string): Record<string, { type: string }> } })._redNodes;
    assert.deepEqual(redNodes.getCredentialDefinition('charging-service'), { clientId: { type: 'text' }, clientSecret: { type: 'password' }, apiKey: { type: 'password' }, coordination: { type: 'password' } });
  });

  it('"allow insecure http" lets a remote http URL through, with a warning in the log', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH], { baseUrl: 'http://charging.example.invalid', allowInsecureHttp: true });
    assert.match(loggedText(), /Base URL uses plain http to charging\.example\.invalid: credentials and tokens travel unencrypted/);
  });

  it('a missing secret is a CONFIG error naming it', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH], {}, { svc: { clientId: CLIENT_ID } });
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    assert.match((caught.error as { message: string }).message, /client secret is not set/);
    assert.equal(rt.sim.requests.length, 0);
  });

  it('a node without a configuration fails with a clear error instead of crashing', async () => {
    await load(rt.sim, [{ ...PROGRESS, service: '' }, ...SINKS, CATCH]);
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    assert.match((caught.error as { message: string }).message, /No charging-service configuration is selected/);
    assertNoSecret(loggedText(), [CLIENT_SECRET], 'the log');
  });

  describe('configuration from the environment (as npm start and production setups use it)', () => {
    const envBefore = { ...process.env };
    const ENV_SVC = { name: '', baseUrl: '${CHARGING_BASE_URL}', authUrl: '${CHARGING_AUTH_URL}' };
    beforeEach(() => {
      Object.assign(process.env, { CHARGING_BASE_URL: rt.sim.baseUrl, CHARGING_AUTH_URL: rt.sim.authUrl, CHARGING_CLIENT_ID: CLIENT_ID, CHARGING_CLIENT_SECRET: CLIENT_SECRET });
    });
    afterEach(() => {
      process.env = { ...envBefore };
    });

    it('URLs as ${NAME} and empty credentials: the values come from the environment, and the query works', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], ENV_SVC, {});
      send('progress', { payload: { token: 'NOBODY' } });
      const out = await Sink.of('out').next();
      assert.equal(out.payload, null);
      assert.equal(rt.sim.counters.tokensIssued, 1);
      assert.equal(Sink.of('caught').messages.length, 0);
    });

    it('credentials typed in the dialog win over the environment', async () => {
      process.env.CHARGING_CLIENT_SECRET = 'not-the-secret';
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], ENV_SVC, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } });
      send('progress', { payload: { token: 'NOBODY' } });
      assert.equal((await Sink.of('out').next()).payload, null);
    });

    it('a variable that is not set is a CONFIG error that names it, and nothing is sent', async () => {
      delete process.env.CHARGING_AUTH_URL;
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], ENV_SVC, {});
      send('progress', { payload: { token: 'T' } });
      const caught = await Sink.of('caught').next();
      assert.equal((caught.error as { code: string }).code, 'CONFIG');
      assert.equal((caught.error as { message: string }).message, 'Token URL is ${CHARGING_AUTH_URL}, but the environment variable CHARGING_AUTH_URL is not set for Node-RED');
      assert.equal(rt.sim.requests.length, 0);
    });

    it('no secret typed and none in the environment: the error names both places', async () => {
      delete process.env.CHARGING_CLIENT_SECRET;
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], ENV_SVC, {});
      send('progress', { payload: { token: 'T' } });
      const caught = await Sink.of('caught').next();
      assert.match((caught.error as { message: string }).message, /client secret is not set in the charging-service configuration \(nor CHARGING_CLIENT_SECRET in Node-RED's environment\)/);
    });

    it('log lines of an unnamed configuration say which service (its host), not an id', async () => {
      delete process.env.CHARGING_CLIENT_SECRET;
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], ENV_SVC, {});
      const logged = helper.log().args.map((a) => a[0] as { type?: string; name?: string; level?: number }).find((e) => e.type === 'charging-service' && e.level === 20);
      assert.equal(logged?.name, new URL(rt.sim.baseUrl).host);
    });

    it('Test connection resolves ${NAME} URLs and uses the environment\'s secret for them', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS], ENV_SVC, {});
      const res = await helper.request().post('/charging-service/test').send({ id: 'svc', ...ENV_SVC, clientId: '', clientSecret: '' }).expect(200);
      assert.equal(res.body.ok, true, res.text);
      assert.ok(!res.text.includes(CLIENT_SECRET));
    });

    it('Test connection never sends the environment\'s secret to a token URL typed in the dialog', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS], ENV_SVC, {});
      const elsewhere = await startSimulator();
      try {
        const res = await helper.request().post('/charging-service/test').send({ id: 'svc', baseUrl: elsewhere.baseUrl, authUrl: elsewhere.authUrl, clientId: '', clientSecret: '' }).expect(200);
        assert.equal(res.body.ok, false);
        assert.match(res.body.error, /Retype the client secret/);
        assert.equal(elsewhere.requests.length, 0, 'nothing reached the other host');
      } finally {
        await elsewhere.stop();
      }
    });
  });
});
