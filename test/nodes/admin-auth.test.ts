/**
 * Test connection's admin route behind Node-RED's own adminAuth, in a real
 * Node-RED process (the test helper stubs RED.auth away): who may call
 * POST /charging-service/test, which can use the stored secret. Nobody
 * without a login, and nobody with only the read permission.
 */
import assert from 'node:assert/strict';
import bcrypt from 'bcryptjs';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, startSimulator } from '../harness';
import { RedProcess } from '../red-process';

const PASSWORD = 'admin-auth-test-password';

describe('Test connection behind adminAuth (a real Node-RED process)', function () {
  this.timeout(60_000);
  let sim: ChargingServiceSimulator;
  let red: RedProcess;

  before(async () => {
    sim = await startSimulator();
    const hash = bcrypt.hashSync(PASSWORD, 8);
    const users = [
      { username: 'admin', password: hash, permissions: '*' },
      { username: 'viewer', password: hash, permissions: 'read' },
      { username: 'flows', password: hash, permissions: ['flows.read', 'flows.write'] },
      { username: 'tester', password: hash, permissions: ['flows.read', 'charging-service.write'] },
    ];
    const flow = [
      { id: 'tab', type: 'tab', label: 'auth' },
      { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '' },
    ];
    red = await RedProcess.prepare('charging-admin-auth-', flow, `    adminAuth: { type: 'credentials', users: ${JSON.stringify(users)}, default: { permissions: 'read' } },`);
    await red.start();
  });

  after(async () => {
    await red?.remove();
    await sim?.stop();
  });

  async function tokenOf(username: string): Promise<string> {
    const res = await fetch(`http://127.0.0.1:${red.port}/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: 'node-red-admin', grant_type: 'password', scope: '', username, password: PASSWORD }),
    });
    assert.equal(res.status, 200, `login of ${username}`);
    // An empty scope asks for the user's own permissions.
    return ((await res.json()) as { access_token: string }).access_token;
  }

  async function testRoute(token?: string): Promise<{ status: number; text: string }> {
    const res = await fetch(`http://127.0.0.1:${red.port}/charging-service/test`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ id: 'svc', baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: CLIENT_ID, clientSecret: '__PWRD__' }),
    });
    return { status: res.status, text: await res.text() };
  }

  it('refuses a caller without a login, and one with only the read permission (or only flows.write), before anything is sent', async () => {
    for (const [who, token] of [
      ['anonymous', undefined],
      ['viewer', await tokenOf('viewer')],
      ['flows', await tokenOf('flows')],
      ['a made-up token', 'not-a-token'],
    ] as const) {
      const res = await testRoute(token);
      assert.equal(res.status, 401, `${who}: ${res.status} ${res.text}`);
      assert.ok(!res.text.includes(CLIENT_SECRET));
    }
    assert.equal(sim.counters.tokenRequests, 0, 'no token request was made for a refused caller');
  });

  it('answers a caller with charging-service.write (or *), with the stored secret and nothing of it in the answer', async () => {
    for (const who of ['admin', 'tester']) {
      const res = await testRoute(await tokenOf(who));
      assert.equal(res.status, 200, `${who}: ${res.text}`);
      assert.equal((JSON.parse(res.text) as { ok: boolean }).ok, true, res.text);
      assert.ok(!res.text.includes(CLIENT_SECRET));
    }
  });
});
