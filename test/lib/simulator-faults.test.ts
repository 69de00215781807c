/**
 * The simulator's faults of real servers and gateways, seen from the wire with raw
 * clients (a net socket, node:https), so that each shows exactly what it says.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { ChargingServiceSimulator, SimulatorOptions, SESSIONS_PATH, TOKEN_PATH } from '../../simulator/simulator';

const FIXTURES = path.join(__dirname, '..', '..', '..', 'test', 'fixtures');
const CERT = fs.readFileSync(path.join(FIXTURES, 'sim-cert.pem'));
const KEY = fs.readFileSync(path.join(FIXTURES, 'sim-key.pem'));

interface RawExchange {
  head: string;
  body: string;
  /** the server closed the connection within the wait */
  closed: boolean;
}

/**
 * One keep-alive request on a raw socket: the answer as it came, and whether the
 * server then closed the connection within waitMs (a keep-alive client would reuse it).
 */
function rawRequest(sim: ChargingServiceSimulator, waitMs: number): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(sim.options.port, sim.options.host);
    let data = '';
    let closed = false;
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (data += d));
    socket.on('error', reject);
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const [head, body = ''] = data.split('\r\n\r\n');
      resolve({ head, body, closed });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.write(`GET ${SESSIONS_PATH}?token=T1 HTTP/1.1\r\nHost: sim\r\nConnection: keep-alive\r\n\r\n`);
  });
}

async function started(opts: SimulatorOptions = {}): Promise<ChargingServiceSimulator> {
  return new ChargingServiceSimulator({ clientId: 'c', clientSecret: 's', startDelayMs: 20, stopDelayMs: 20, ...opts }).start();
}

async function bearer(sim: ChargingServiceSimulator): Promise<string> {
  const res = await fetch(`${sim.url}${TOKEN_PATH}`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from('c:s').toString('base64')}`, Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

describe('simulator faults of real servers and gateways', () => {
  let sim: ChargingServiceSimulator;
  afterEach(async () => {
    await sim?.stop();
  });

  it('close-after-answer: the whole answer, no Connection: close, then the connection is closed', async () => {
    sim = await started();
    const normal = await rawRequest(sim, 300);
    assert.equal(normal.closed, false, 'without the fault the keep-alive connection stays open');
    sim.inject({ target: 'any', kind: 'close-after-answer', times: Infinity });
    const ex = await rawRequest(sim, 1000);
    assert.match(ex.head, /^HTTP\/1\.1 401 /);
    assert.doesNotMatch(ex.head, /connection: close/i);
    assert.match(ex.head, /connection: keep-alive/i);
    assert.equal(JSON.parse(ex.body).error, 'unauthorized', 'the body arrived whole before the close');
    assert.equal(ex.closed, true);
  });

  it('close-after-answer does not hide a fault armed after it', async () => {
    sim = await started();
    sim.inject({ target: 'any', kind: 'close-after-answer', times: Infinity });
    sim.inject({ target: 'get', kind: 'status', status: 503 });
    const ex = await rawRequest(sim, 1000);
    assert.match(ex.head, /^HTTP\/1\.1 503 /);
    assert.equal(ex.closed, true);
  });

  it('idle-close: no Keep-Alive hint and the idle connection closes; the normal server still sends the hint', async () => {
    sim = await started();
    const normal = await rawRequest(sim, 100);
    assert.match(normal.head, /keep-alive: timeout=5/i);
    sim.inject({ target: 'any', kind: 'idle-close', delayMs: 200 });
    const ex = await rawRequest(sim, 900); // Node's own keep-alive timer would wait 1.2 s
    assert.doesNotMatch(ex.head, /keep-alive: timeout/i);
    assert.doesNotMatch(ex.head, /connection: close/i);
    assert.equal(ex.closed, true, 'closed once idle');
    sim.clearFaults();
    assert.match((await rawRequest(sim, 100)).head, /keep-alive: timeout=5/i, 'clearFaults brings the hint back');
  });

  it('idle-close as an option from the start', async () => {
    sim = await started({ idleCloseMs: 200 });
    const ex = await rawRequest(sim, 900); // Node's own keep-alive timer would wait 1.2 s
    assert.doesNotMatch(ex.head, /keep-alive: timeout/i);
    assert.equal(ex.closed, true);
  });

  it("route-404: Kong's JSON body, or nginx's HTML page, for every request", async () => {
    sim = await started();
    sim.inject({ target: 'any', kind: 'route-404', times: 2 });
    const get = await fetch(`${sim.url}${SESSIONS_PATH}?token=T1`);
    assert.equal(get.status, 404);
    assert.deepEqual(await get.json(), { message: 'no Route matched with those values' });
    const token = await fetch(`${sim.url}${TOKEN_PATH}`, { method: 'POST' });
    assert.equal(token.status, 404);
    assert.deepEqual(await token.json(), { message: 'no Route matched with those values' });
    sim.inject({ target: 'any', kind: 'route-404', format: 'html' });
    const html = await fetch(`${sim.url}${SESSIONS_PATH}`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
    assert.equal(html.status, 404);
    assert.match(html.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await html.text(), /^<html>\r\n<head><title>404 Not Found<\/title><\/head>/);
    assert.equal(sim.counters.starts, 0, 'the gateway answered: the service saw nothing');
  });

  it('the new faults at run time over /__sim/faults, and DELETE clears them', async () => {
    sim = await started();
    const arm = (rule: object) => fetch(`${sim.url}/__sim/faults`, { method: 'POST', body: JSON.stringify(rule) });
    assert.equal((await arm({ target: 'any', kind: 'route-404', times: 'Infinity' })).status, 200);
    assert.equal((await arm({ target: 'any', kind: 'idle-close', delayMs: 2000 })).status, 200);
    const state = (await (await fetch(`${sim.url}/__sim/state`)).json()) as { idleCloseMs: number; faults: Array<{ kind: string }> };
    assert.equal(state.idleCloseMs, 2000); // long enough that fetch's own pooled connection is not closed under it
    assert.deepEqual(state.faults.map((f) => f.kind), ['route-404']);
    for (let i = 0; i < 2; i++) assert.equal((await fetch(`${sim.url}${SESSIONS_PATH}?token=T1`)).status, 404);
    assert.doesNotMatch((await rawRequest(sim, 100)).head, /keep-alive: timeout/i);
    await fetch(`${sim.url}/__sim/faults`, { method: 'DELETE' });
    assert.equal((await fetch(`${sim.url}${SESSIONS_PATH}?token=T1`)).status, 401, 'the service again: no bearer token');
    assert.match((await rawRequest(sim, 100)).head, /keep-alive: timeout=5/i);
  });

  it('ignore-stop: the next n STOPs get 202 and the session goes on; the one after ends it', async () => {
    sim = await started();
    const auth = { Authorization: `Bearer ${await bearer(sim)}`, 'Content-Type': 'application/json' };
    const cmd = { locationId: 'L1', evseId: '1', token: 'T1' };
    assert.equal((await fetch(`${sim.url}${SESSIONS_PATH}`, { method: 'POST', headers: auth, body: JSON.stringify({ action: 'START', ...cmd }) })).status, 202);
    await new Promise((r) => setTimeout(r, 60));
    const transactionId = sim.session('T1')?.transactionId;
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 2 });
    const stop = () => fetch(`${sim.url}${SESSIONS_PATH}`, { method: 'POST', headers: auth, body: JSON.stringify({ action: 'STOP', transactionId, ...cmd }) });
    for (let i = 0; i < 2; i++) {
      assert.equal((await stop()).status, 202);
      await new Promise((r) => setTimeout(r, 60)); // past stopDelayMs: a real stop would be gone
      assert.equal(sim.session('T1')?.stoppedAt, null, `STOP ${i + 1} ignored: the session goes on`);
      assert.equal(sim.activeSessions(), 1);
    }
    assert.equal((await stop()).status, 202);
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(sim.activeSessions(), 0, 'the third STOP ends it');
  });

  it('ignore-start: the next n STARTs get 202 and no session appears; the one after starts it', async () => {
    sim = await started();
    const auth = { Authorization: `Bearer ${await bearer(sim)}`, 'Content-Type': 'application/json' };
    const start = () => fetch(`${sim.url}${SESSIONS_PATH}`, { method: 'POST', headers: auth, body: JSON.stringify({ action: 'START', locationId: 'L1', evseId: '1', token: 'T1' }) });
    sim.inject({ target: 'post', kind: 'ignore-start', times: 2 });
    for (let i = 0; i < 2; i++) {
      assert.equal((await start()).status, 202);
      await new Promise((r) => setTimeout(r, 60)); // past startDelayMs: a real start would show
      assert.equal(sim.session('T1'), undefined, `START ${i + 1} ignored: no session`);
      assert.equal((await fetch(`${sim.url}${SESSIONS_PATH}?token=T1`, { headers: auth })).status, 404);
    }
    assert.equal((await start()).status, 202);
    await new Promise((r) => setTimeout(r, 60));
    assert.match(String(sim.session('T1')?.transactionId), /^TX-/, 'the third START starts it');
    assert.equal(sim.counters.starts, 3);
    // A START refused for another reason (409: a session is active) does not use it up.
    sim.inject({ target: 'post', kind: 'ignore-start', times: 1 });
    assert.equal((await start()).status, 409);
    assert.equal(sim.pendingFaults().length, 1);
  });

  it('counts every arrival of the same START and STOP, whatever it was answered', async () => {
    sim = await started();
    const auth = { Authorization: `Bearer ${await bearer(sim)}`, 'Content-Type': 'application/json' };
    const cmd = { locationId: 'L1', evseId: '1', token: 'T1' };
    const post = (body: object) => fetch(`${sim.url}${SESSIONS_PATH}`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
    // 429: the service said it did not act, so the same START may come again.
    sim.inject({ target: 'post', kind: 'status', status: 429 });
    assert.equal((await post({ action: 'START', ...cmd })).status, 429);
    assert.equal((await post({ action: 'START', ...cmd })).status, 202);
    assert.equal((await post({ action: 'START', ...cmd })).status, 409);
    assert.equal(sim.arrivals('START', 'T1|L1|1'), 3);
    assert.equal(sim.counters.startArrivals, 3);
    assert.equal(sim.counters.duplicateStartArrivals, 1, 'the one after the 202');
    // A 503 answered before processing: the client cannot know, so another arrival is a duplicate.
    sim.inject({ target: 'post', kind: 'status', status: 503 });
    const other = { action: 'START', locationId: 'L2', evseId: '1', token: 'T2' };
    assert.equal((await post(other)).status, 503);
    assert.equal((await post(other)).status, 202);
    assert.equal(sim.duplicateArrivals('START', 'T2|L2|1'), 1);
    assert.equal(sim.counters.duplicateStartArrivals, 2);
    assert.equal(sim.counters.duplicateStarts, 1, 'the old counter still counts only the refused one');
    await new Promise((r) => setTimeout(r, 60));
    const transactionId = sim.session('T1')?.transactionId as string;
    assert.equal((await post({ action: 'STOP', transactionId, ...cmd })).status, 202);
    await new Promise((r) => setTimeout(r, 60));
    assert.equal((await post({ action: 'STOP', transactionId, ...cmd })).status, 404, 'already stopped');
    assert.equal(sim.arrivals('STOP', transactionId), 2);
    assert.equal(sim.counters.duplicateStopArrivals, 1);
    assert.equal(sim.counters.duplicateStops, 0, 'the old counter missed it');
    assert.equal(sim.arrivals('START', 'T3|L1|1'), 0);
  });

  it('TLS: https with the CA succeeds, without it the handshake fails', async () => {
    sim = await started({ tls: { cert: CERT, key: KEY } });
    assert.match(sim.baseUrl, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(await httpsStatus(sim, { ca: CERT }), 401);
    await assert.rejects(httpsStatus(sim, {}), /self[- ]signed/i);
  });

  it('TLS with a client certificate required: refused without one, answered with one', async () => {
    sim = await started({ tls: { cert: CERT, key: KEY, ca: CERT, requestCert: true } });
    await assert.rejects(httpsStatus(sim, { ca: CERT }), (err: NodeJS.ErrnoException) => /certificate|ECONNRESET|socket hang up/i.test(`${err.code} ${err.message}`));
    assert.equal(await httpsStatus(sim, { ca: CERT, cert: CERT, key: KEY }), 401);
  });
});

function httpsStatus(sim: ChargingServiceSimulator, tls: https.RequestOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${sim.baseUrl}${SESSIONS_PATH}?token=T1`, { ...tls, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}
