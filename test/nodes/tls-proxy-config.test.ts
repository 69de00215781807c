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
});
