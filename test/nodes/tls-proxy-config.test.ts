/** The service node's TLS and proxy set-up through the real runtime. */
import assert from 'node:assert/strict';
import path from 'node:path';
import { helper, Sink, send, flowFor, fromNodeRed, runtimeSuite, NODES } from '../harness';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const TLS_NODE = require(fromNodeRed('@node-red/nodes/core/network/05-tls.js'));

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

describe('charging-service: TLS configuration problems', () => {
  const rt = runtimeSuite();

  it('a tls-config node that cannot load its CA file is a CONFIG error on each message, and nothing is sent', async () => {
    const f = flowFor(rt.sim, [PROGRESS, ...SINKS, CATCH], { tls: 'tlsconf' });
    const missing = path.join(__dirname, 'no-such-ca.pem');
    f.flow.push({ id: 'tlsconf', type: 'tls-config', name: 'corporate CA', cert: '', key: '', ca: missing, verifyservercert: true });
    await helper.load([...NODES, TLS_NODE], f.flow, f.credentials);
    for (let i = 0; i < 2; i++) {
      send('progress', { payload: { token: 'T' } });
      const caught = await Sink.of('caught').next();
      const error = caught.error as { code: string; message: string };
      assert.equal(error.code, 'CONFIG');
      assert.match(error.message, /TLS configuration "corporate CA" could not load its certificate, key or CA file/);
    }
    assert.equal(rt.sim.requests.length, 0);
  });

  it('a proxy password with a literal % is a CONFIG error on each message naming the variable, never the password; nothing is sent', async () => {
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY };
    process.env.HTTP_PROXY = 'http://corp-user:50%off@127.0.0.1:3128';
    delete process.env.NO_PROXY;
    try {
      const f = flowFor(rt.sim, [PROGRESS, ...SINKS, CATCH]);
      await helper.load(NODES, f.flow, f.credentials);
      send('progress', { payload: { token: 'T' } });
      const error = (await Sink.of('caught').next()).error as { code: string; message: string };
      assert.equal(error.code, 'CONFIG');
      assert.match(error.message, /The user or password in HTTP_PROXY \(proxy http:\/\/127\.0\.0\.1:3128\) is not valid percent-encoding/);
      assert.ok(!JSON.stringify(error).includes('50%off'));
      assert.equal(rt.sim.requests.length, 0);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
