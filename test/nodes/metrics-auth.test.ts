/**
 * /metrics behind Node-RED's own httpNodeAuth, in a real Node-RED process
 * (the test helper mounts no http in routes and no authentication): what
 * Prometheus gets with its basic_auth, and what anyone else gets.
 */
import assert from 'node:assert/strict';
import bcrypt from 'bcryptjs';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { CLIENT_SECRET, delay, startSimulator } from '../harness';
import { RedProcess } from '../red-process';
import { parsePrometheusText, valueOf } from '../prometheus-text';

const USER = 'prometheus';
const PASSWORD = 'scrape-Pa55word';

describe('/metrics behind httpNodeAuth (a real Node-RED process)', function () {
  this.timeout(60_000);
  let sim: ChargingServiceSimulator;
  let red: RedProcess;

  before(async () => {
    sim = await startSimulator();
    const flow = [
      { id: 'tab', type: 'tab', label: 'metrics' },
      { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '' },
      { id: 'watcher', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', watchTokens: 'AUTH-RFID-1 AUTH-RFID-2', interval: 1, wires: [[]] },
      { id: 'in', type: 'http in', z: 'tab', url: '/metrics', method: 'get', upload: false, swaggerDoc: '', wires: [['metrics']] },
      { id: 'metrics', type: 'charging-metrics', z: 'tab', name: '', wires: [['out']] },
      { id: 'out', type: 'http response', z: 'tab', statusCode: '', headers: {}, wires: [] },
    ];
    red = await RedProcess.prepare('charging-metrics-auth-', flow, `    httpNodeAuth: { user: '${USER}', pass: '${bcrypt.hashSync(PASSWORD, 8)}' },`);
    await red.start();
  });

  after(async () => {
    await red?.remove();
    await sim?.stop();
  });

  const get = (auth?: string) => fetch(`http://127.0.0.1:${red.port}/metrics`, { headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {} });

  it('no credentials or wrong ones: 401 and nothing of the metrics', async () => {
    for (const auth of [undefined, `${USER}:wrong`, `someone:${PASSWORD}`]) {
      const res = await get(auth);
      const text = await res.text();
      assert.equal(res.status, 401, String(auth));
      assert.ok(!text.includes('chargectl_'), 'no metric in the refusal');
    }
  });

  it('with basic_auth as Prometheus sends it: the exposition, strict, with the watch node\'s figures and no secret', async () => {
    let text = '';
    for (let i = 0; i < 50; i++) {
      const res = await get(`${USER}:${PASSWORD}`);
      assert.equal(res.status, 200);
      assert.match(String(res.headers.get('content-type')), /^text\/plain;.*version=0\.0\.4/);
      text = await res.text();
      if ((valueOf(parsePrometheusText(text), 'chargectl_requests_total', { config: 'sim', kind: 'progress', outcome: 'ok', code: 'none' }) ?? 0) >= 2) break;
      await delay(100);
    }
    const families = parsePrometheusText(text);
    assert.equal(valueOf(families, 'chargectl_watched_sessions', { config: 'sim' }), 2);
    assert.ok((valueOf(families, 'chargectl_requests_total', { config: 'sim', kind: 'progress', outcome: 'ok', code: 'none' }) ?? 0) >= 2, 'each token polled');
    for (const secret of [CLIENT_SECRET, 'AUTH-RFID', sim.baseUrl]) assert.ok(!text.includes(secret), secret);
  });
});
