/**
 * The Token URL as typed: the spec's auth base gets /v1/token, while a standard
 * OAuth server's full token endpoint (its path ends in /token) is used as it is.
 * Shown with the paths Keycloak, Azure AD and Auth0 serve, against a simulator
 * whose token endpoint listens there, through a real runtime.
 */
import assert from 'node:assert/strict';
import { tokenEndpoint } from '../../nodes/lib/client/token-endpoint';
import { TOKEN_PATH } from '../../simulator/simulator';
import { load, Sink, send, startSimulator, runtimeSuite } from '../harness';

const SHAPES: Array<[string, string]> = [
  ['Keycloak', '/realms/depot/protocol/openid-connect/token'],
  ['Azure AD', '/0d3c7e4a-tenant/oauth2/v2.0/token'],
  ['Auth0', '/oauth/token'],
  ['Okta', '/oauth2/default/v1/token'],
];

describe('Token URL: the spec form gets /v1/token, a full token endpoint is used as typed', function () {
  const rt = runtimeSuite();

  it('builds the address from the path, whatever follows it', () => {
    assert.equal(tokenEndpoint('https://a.example/auth'), 'https://a.example/auth/v1/token');
    assert.equal(tokenEndpoint(' https://a.example/auth/// '), 'https://a.example/auth/v1/token');
    assert.equal(tokenEndpoint('https://a.example/v1/token'), 'https://a.example/v1/token');
    for (const [, path] of SHAPES) assert.equal(tokenEndpoint(`https://idp.example${path}`), `https://idp.example${path}`);
    assert.equal(tokenEndpoint('https://a.example/tokens'), 'https://a.example/tokens/v1/token', 'only a whole last segment "token" counts');
    // A typed query or fragment cannot swallow the suffix: it goes into the path.
    assert.equal(tokenEndpoint('https://a.example/auth?x=1'), 'https://a.example/auth/v1/token?x=1');
    assert.equal(tokenEndpoint('https://a.example/auth#'), 'https://a.example/auth/v1/token');
    assert.equal(tokenEndpoint('https://a.example/auth/?'), 'https://a.example/auth/v1/token?');
  });

  it('trims a run of 40 000 slashes at once (no regex backtracking)', () => {
    const slashes = `https://a.example/auth${'/'.repeat(40_000)}x`;
    const t0 = process.hrtime.bigint();
    const out = tokenEndpoint(slashes);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    assert.ok(out.endsWith('/x/v1/token'));
    assert.ok(ms < 50, `took ${ms.toFixed(1)} ms`);
  });

  for (const [name, path] of SHAPES) {
    it(`${name}-shaped token endpoint ${path}: the token is requested there and the query answered`, async () => {
      const idp = await startSimulator({ tokenPath: path });
      try {
        await load(idp, [
          { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] },
          { id: 'out', type: 'helper' },
          { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] },
          { id: 'caught', type: 'helper' },
        ], { authUrl: idp.authUrl });
        send('progress', { payload: { token: 'NOBODY' } });
        const msg = await Sink.of('out').next();
        assert.equal(msg.payload, null, 'no session: payload null');
        assert.equal(Sink.of('caught').messages.length, 0, 'no error');
        assert.deepEqual(idp.requests.filter((r) => r.method === 'POST').map((r) => r.path), [path]);
        assert.equal(idp.counters.tokensIssued, 1);
      } finally {
        await idp.stop();
      }
    });
  }

  it('the spec form still works as before', async () => {
    await load(rt.sim, [
      { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] },
      { id: 'out', type: 'helper' },
    ]);
    send('progress', { payload: { token: 'NOBODY' } });
    assert.equal((await Sink.of('out').next()).payload, null);
    assert.deepEqual(rt.sim.requests.filter((r) => r.method === 'POST').map((r) => r.path), [TOKEN_PATH]);
  });
});
