/**
 * charging-metrics through a real `http in` (GET /metrics) → charging-metrics
 * → `http response` flow, scraped over HTTP while the nodes work against the
 * simulator: each metric moves as it should, the text reads as Prometheus
 * reads it (test/prometheus-text.ts, strict), and nothing secret or
 * per-token is in it. The test helper serves no `http in` routes, so the
 * runtime's node app (RED.httpNode) is served here on a loopback port.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NodeAPI } from 'node-red';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { runtimeMetrics } from '../../nodes/lib/metrics/registry';
import { attachSinks, CLIENT_ID, CLIENT_SECRET, delay, flowFor, fromNodeRed, freePort, helper, NODES, runtimeSuite, send, Sink, until, type FlowNode } from '../harness';
import { parsePrometheusText, valueOf, type Family } from '../prometheus-text';

/* eslint-disable @typescript-eslint/no-require-imports */
const HTTP_IN = require(fromNodeRed('@node-red/nodes/core/network/21-httpin.js')) as (RED: NodeAPI) => void;
/* eslint-enable @typescript-eslint/no-require-imports */

const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
/** The endpoint as a user wires it, and a second metrics node whose output a test reads. */
const ENDPOINT: FlowNode[] = [
  { id: 'in', type: 'http in', url: '/metrics', method: 'get', upload: false, swaggerDoc: '', wires: [['metrics']] },
  { id: 'metrics', type: 'charging-metrics', name: '', wires: [['out']] },
  { id: 'out', type: 'http response', statusCode: '', headers: {}, wires: [] },
  { id: 'asked', type: 'charging-metrics', name: '', wires: [['answer']] },
  { id: 'answer', type: 'helper' },
  { id: 'caught', type: 'helper' },
  CATCH,
];

interface Scraped {
  status: number;
  contentType: string | null;
  text: string;
  families: Map<string, Family>;
}

describe('charging-metrics: /metrics through http in, against the simulator', function () {
  this.timeout(20_000);
  const rt = runtimeSuite({ startDelayMs: 50, stopDelayMs: 50 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  let server: http.Server | null = null;
  let port = 0;

  afterEach(async () => {
    const s = server;
    server = null;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  });

  /** Loads the endpoint and `nodes` (configuration `svc` on the simulator), and serves the runtime's http in routes. */
  async function load(nodes: FlowNode[], service: Record<string, unknown> = {}, credentials?: Record<string, unknown>): Promise<void> {
    let app: http.RequestListener | undefined;
    const captureApp = (RED: NodeAPI) => void (app = (RED as unknown as { httpNode: http.RequestListener }).httpNode);
    const f = flowFor(rt.sim, [...ENDPOINT, ...nodes], service);
    const previous = server;
    if (previous) await new Promise<void>((r) => previous.close(() => r()));
    await helper.load([...NODES, HTTP_IN, captureApp], f.flow, credentials ?? f.credentials);
    attachSinks(f.flow);
    server = http.createServer(app);
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  }

  async function scrape(): Promise<Scraped> {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get('content-type'), text, families: parsePrometheusText(text) };
  }

  const value = (s: Scraped, name: string, labels: Record<string, string>) => valueOf(s.families, name, { config: 'sim', ...labels }) ?? 0;

  it('a START: chargectl_requests_total{kind="start",outcome="ok"} +1 and one duration observation; the text parses strictly, with its content type', async () => {
    await load([{ id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] }, { id: 'started', type: 'helper' }]);
    const before = await scrape();
    assert.equal(before.status, 200);
    // prom-client's content type, its parameters in the order express writes them
    assert.deepEqual(before.contentType?.split(/;\s*/).sort(), ['charset=utf-8', 'text/plain', 'version=0.0.4']);
    assert.equal(value(before, 'chargectl_requests_total', { kind: 'start', outcome: 'ok', code: 'none' }), 0);

    send('start', { payload: { locationId: 'LOC-M', evseId: 1, token: 'RFID-M-1' } });
    await Sink.of('started').next();
    const after = await scrape();
    assert.equal(value(after, 'chargectl_requests_total', { kind: 'start', outcome: 'ok', code: 'none' }), 1);
    assert.equal(value(after, 'chargectl_request_duration_seconds_count', { kind: 'start' }), 1);
    assert.ok(value(after, 'chargectl_request_duration_seconds_sum', { kind: 'start' }) > 0, 'the START took some time');
    assert.equal(value(after, 'chargectl_request_duration_seconds_bucket', { kind: 'start', le: '+Inf' }), 1);
    // Its token: one flight, one token taken into use, no retry.
    assert.equal(value(after, 'chargectl_requests_total', { kind: 'token', outcome: 'ok', code: 'none' }), 1);
    assert.equal(value(after, 'chargectl_token_renewals_total', {}), 1);
    assert.equal(value(after, 'chargectl_request_retries_total', { kind: 'start' }), 0);
    for (const f of after.families.values()) assert.ok(f.name.startsWith('chargectl_'), f.name);
  });

  it('a 429: the throttled counter, the retry after it, and the query counted once, answered', async () => {
    await load([{ id: 'query', type: 'charging-progress', service: 'svc', wires: [['queried']] }, { id: 'queried', type: 'helper' }]);
    rt.sim.inject({ target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '0' }, body: '{"message":"slow down"}' });
    send('query', { payload: { token: 'RFID-M-429' } });
    await Sink.of('queried').next();
    const s = await scrape();
    assert.equal(value(s, 'chargectl_throttled_total', { kind: 'progress' }), 1);
    assert.equal(value(s, 'chargectl_request_retries_total', { kind: 'progress' }), 1);
    assert.equal(value(s, 'chargectl_requests_total', { kind: 'progress', outcome: 'ok', code: 'none' }), 1);
    assert.equal(value(s, 'chargectl_request_duration_seconds_count', { kind: 'progress' }), 1);
  });

  it('Max requests per second: a request that had to wait for its place is one budget-wait observation', async () => {
    await load([{ id: 'query', type: 'charging-progress', service: 'svc', wires: [['queried']] }, { id: 'queried', type: 'helper' }], { maxRequestsPerSec: 5 });
    for (const t of ['B1', 'B2', 'B3']) send('query', { payload: { token: t } });
    await Sink.of('queried').nth(3);
    const s = await scrape();
    const waited = value(s, 'chargectl_budget_wait_seconds_count', {});
    assert.ok(waited >= 2 && waited <= 3, `queries that waited: ${waited}`);
    assert.ok(value(s, 'chargectl_budget_wait_seconds_sum', {}) >= 0.15, 'two places 200 ms apart were waited for');
  });

  it('a watch of 3 tokens: watched 3; two sessions started: charging 2; its events counted by kind', async () => {
    await load([
      { id: 'watcher', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: 'W-1 W-2 W-3', interval: 0.2, wires: [['events']] },
      { id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] },
      { id: 'events', type: 'helper' },
      { id: 'started', type: 'helper' },
    ]);
    await until(() => rt.sim.counters.progressQueries >= 3, 'the first polls');
    const first = await scrape();
    assert.equal(value(first, 'chargectl_watched_sessions', {}), 3);
    assert.equal(value(first, 'chargectl_sessions_charging', {}), 0);
    send('start', { payload: { locationId: 'LOC-W', evseId: 1, token: 'W-1' } });
    send('start', { payload: { locationId: 'LOC-W', evseId: 2, token: 'W-2' } });
    const events = Sink.of('events');
    await until(() => events.messages.filter((m) => m.event === 'started').length === 2, 'both started');
    const charging = await scrape();
    assert.equal(value(charging, 'chargectl_sessions_charging', {}), 2);
    assert.equal(value(charging, 'chargectl_watched_sessions', {}), 3);
    const counted = (event: string) => value(charging, 'chargectl_watch_events_total', { event });
    const sent = (event: string) => events.messages.filter((m) => m.event === event).length;
    for (const event of ['pending', 'started', 'updated']) assert.equal(counted(event), sent(event), event);
    assert.equal(counted('started'), 2);
    send('watcher', { topic: 'unwatch', payload: 'W-3' });
    await delay(50);
    assert.equal(value(await scrape(), 'chargectl_watched_sessions', {}), 2);
  });

  it('a failed token fetch: chargectl_token_failures_total with its code, and the query counted as an error with it', async () => {
    await load(
      [{ id: 'query', type: 'charging-progress', service: 'svc', wires: [['queried']] }, { id: 'queried', type: 'helper' }],
      {},
      { svc: { clientId: CLIENT_ID, clientSecret: 'not-the-secret' } },
    );
    send('query', { payload: { token: 'RFID-M-AUTH' } });
    const err = await Sink.of('caught').next();
    assert.equal((err.error as { code: string }).code, 'AUTH');
    const s = await scrape();
    assert.equal(value(s, 'chargectl_token_failures_total', { code: 'AUTH' }), 1);
    assert.equal(value(s, 'chargectl_requests_total', { kind: 'token', outcome: 'error', code: 'AUTH' }), 1);
    assert.equal(value(s, 'chargectl_requests_total', { kind: 'progress', outcome: 'error', code: 'AUTH' }), 1);
    assert.equal(value(s, 'chargectl_token_renewals_total', {}), 0);
  });

  it('control nodes by state: a connector kept on reads charging, every other state 0', async () => {
    await load([{ id: 'control', type: 'charging-control', service: 'svc', locationId: 'LOC-C', evseId: '1', token: 'RFID-C-1', guard: 0, checkInterval: 0.2, wires: [['states']] }, { id: 'states', type: 'helper' }]);
    send('control', { payload: true });
    await until(() => Sink.of('states').messages.some((m) => m.payload === 'charging'), 'charging');
    const s = await scrape();
    assert.equal(value(s, 'chargectl_control_targets', { state: 'charging' }), 1);
    for (const state of ['idle', 'starting', 'stopping', 'guard', 'failed', 'busy', 'done']) assert.equal(valueOf(s.families, 'chargectl_control_targets', { config: 'sim', state }), 0, state);
  });

  it('a depot of limit 2 with three connectors on: in use 2, waiting 1, its limit 2 and the kW it counts; no budget, so no budget series', async () => {
    const depot = { id: 'dep', type: 'charging-depot', name: 'yard', limit: 2, minRun: 1, turn: '0', aging: 3600, idleKWh: 0, idleWindow: 0, overFor: 1 };
    const control = { id: 'ctl', type: 'charging-control', service: 'svc', depot: 'dep', locationId: '', evseId: '', token: '', guard: 0, checkInterval: 0.2, waitTimeout: 1, wires: [['states']] };
    await load([depot, control, { id: 'states', type: 'helper' }]);
    for (const n of [1, 2, 3]) send('ctl', { payload: true, target: { locationId: 'LOC-D', evseId: String(n), token: `RFID-D-${n}` } });
    await until(() => Sink.of('states').messages.filter((m) => m.payload === 'queued').length >= 1 && Sink.of('states').messages.filter((m) => m.payload === 'charging').length >= 2, 'two charging, one queued', 8_000);
    await delay(500);
    const s = await scrape();
    assert.equal(value(s, 'chargectl_depot_in_use', { depot: 'yard' }), 2);
    assert.equal(value(s, 'chargectl_depot_waiting', { depot: 'yard' }), 1);
    assert.equal(value(s, 'chargectl_depot_limit', { depot: 'yard' }), 2);
    assert.equal(value(s, 'chargectl_depot_used_kw', { depot: 'yard' }), 22, 'two sessions at the assumed 11 kW');
    assert.equal(valueOf(s.families, 'chargectl_depot_budget_kw', { config: 'sim', depot: 'yard' }), undefined, 'no budget set: no series');
  });

  it('msg.format "json": the same values as an object; an unknown format: INVALID_INPUT at Catch, nothing sent', async () => {
    await load([{ id: 'query', type: 'charging-progress', service: 'svc', wires: [['queried']] }, { id: 'queried', type: 'helper' }]);
    send('query', { payload: { token: 'RFID-M-J' } });
    await Sink.of('queried').next();
    send('asked', { format: 'json', headers: { 'Content-Length': '12', 'x-keep': 'yes' } });
    const answer = await Sink.of('answer').next();
    const body = answer.payload as Record<string, { type: string; values: Array<{ labels: Record<string, string>; value: number }> }>;
    const requests = body.chargectl_requests_total;
    assert.equal(requests.type, 'counter');
    const text = await scrape();
    for (const v of requests.values) assert.equal(v.value, valueOf(text.families, 'chargectl_requests_total', v.labels), JSON.stringify(v.labels));
    assert.ok(requests.values.length >= 2, 'the query and its token');
    assert.deepEqual(answer.headers, { 'x-keep': 'yes', 'content-type': 'application/json; charset=utf-8' });

    for (const format of ['yaml', 42, { kind: 'json' }]) {
      send('asked', { format });
      const caught = await Sink.of('caught').next();
      assert.equal((caught.error as { code: string }).code, 'INVALID_INPUT');
      assert.match(String((caught.error as { message: string }).message), /msg\.format must be "prometheus".*or "json"/);
    }
    await delay(50);
    assert.equal(Sink.of('answer').messages.length, 1, 'nothing on the output for a bad format');
  });

  it('nothing secret or per-token: no token, transaction, access token, secret, API key, or credentials of a name written as a URL', async () => {
    const name = 'https://ops:hunter2-pw@depot.example/fleet';
    const apiKey = 'api-KEY-value-never-shown';
    const tokens = ['SECRET-RFID-1', 'SECRET-RFID-2', 'SECRET-RFID-3'];
    await load(
      [
        { id: 'watcher', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: tokens.join(' '), interval: 0.2, wires: [['events']] },
        { id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] },
        { id: 'events', type: 'helper' },
        { id: 'started', type: 'helper' },
      ],
      { name },
      { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, apiKey } },
    );
    send('start', { payload: { locationId: 'LOC-SECRET', evseId: 1, token: tokens[0] } });
    await until(() => Sink.of('events').messages.some((m) => m.event === 'started'), 'started');
    rt.sim.inject({ target: 'get', kind: 'status', status: 500, body: `{"message":"boom for ${tokens[1]}"}` });
    await delay(600);
    const s = await scrape();
    send('asked', { format: 'json' });
    const json = JSON.stringify((await Sink.of('answer').next()).payload);
    const bearers = rt.sim.requests.map((r) => String(r.headers.authorization ?? '').replace(/^Bearer /, '')).filter((b) => b.length > 8);
    const transactions = [...tokens].map((t) => rt.sim.session(t)?.transactionId).filter((x): x is string => Boolean(x));
    assert.ok(bearers.length > 0 && transactions.length === 1, 'the test saw the values it looks for');
    for (const text of [s.text, json]) {
      for (const secret of [CLIENT_SECRET, apiKey, 'hunter2-pw', 'ops:', rt.sim.baseUrl, rt.sim.authUrl, 'LOC-SECRET', ...tokens, ...bearers, ...transactions]) {
        assert.ok(!text.includes(secret), `${secret} appears in the exposition`);
      }
    }
    assert.equal(value(s, 'chargectl_watched_sessions', { config: 'https://depot.example/fleet' }), 3, 'labelled by the name, its credentials taken out');
  });

  it('redeployed: the old configuration\'s series leave, the new one counts from 0, and metrics are never registered twice', async () => {
    const query = [{ id: 'query', type: 'charging-progress', service: 'svc', wires: [['queried']] }, { id: 'queried', type: 'helper' }];
    await load(query, { name: 'first' });
    send('query', { payload: { token: 'RFID-R' } });
    await Sink.of('queried').next();
    assert.equal(valueOf((await scrape()).families, 'chargectl_requests_total', { config: 'first', kind: 'progress', outcome: 'ok', code: 'none' }), 1);
    await helper.unload();
    await load(query, { name: 'second' });
    const s = await scrape();
    assert.ok(!s.text.includes('config="first"'), 'the closed configuration left no series');
    assert.equal(valueOf(s.families, 'chargectl_requests_total', { config: 'second', kind: 'progress', outcome: 'ok', code: 'none' }), undefined, 'nothing counted yet');
    send('query', { payload: { token: 'RFID-R' } });
    await Sink.of('queried').next();
    assert.equal(valueOf((await scrape()).families, 'chargectl_requests_total', { config: 'second', kind: 'progress', outcome: 'ok', code: 'none' }), 1);
  });

  it('Redis does not answer: redis_up 0, no round trip, the scrape still answers in full', async () => {
    const redisUrl = `redis://:redis-PW-secret@127.0.0.1:${await freePort()}`;
    await load([{ id: 'watcher', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: 'R-1', interval: 0.2, wires: [[]] }], { fleetKey: 'metrics-down' }, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redisUrl } });
    let s = await scrape();
    for (let i = 0; i < 50 && valueOf(s.families, 'chargectl_redis_up', { config: 'sim' }) !== 0; i++) {
      await delay(100);
      s = await scrape();
    }
    assert.equal(s.status, 200);
    assert.equal(valueOf(s.families, 'chargectl_redis_up', { config: 'sim' }), 0);
    assert.equal(valueOf(s.families, 'chargectl_redis_round_trip_seconds', { config: 'sim' }), undefined, 'left out, not made up');
    assert.equal(valueOf(s.families, 'chargectl_fleet_leases_held', { config: 'sim' }), 0);
    assert.ok(!s.text.includes('redis-PW-secret') && !s.text.includes('redis://'), 'no Redis URL');
  });

  it('a scrape while every node closes (a redeploy) resolves and parses every time', async () => {
    await load([
      { id: 'watcher', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: 'C-1 C-2', interval: 0.2, wires: [[]] },
      { id: 'control', type: 'charging-control', service: 'svc', locationId: 'LOC-X', evseId: '1', token: 'C-1', checkInterval: 0.2, wires: [[]] },
    ]);
    send('control', { payload: true });
    await delay(200);
    const scrapes: Array<Promise<string>> = [];
    let closing = true;
    const unloading = helper.unload().finally(() => (closing = false));
    while (closing) {
      scrapes.push(runtimeMetrics().scrape('text').then((r) => r.body as string));
      await delay(1);
    }
    await unloading;
    const texts = await Promise.all(scrapes);
    assert.ok(texts.length > 0);
    for (const t of texts) parsePrometheusText(t);
    assert.ok(!texts.at(-1)?.includes('config="sim"'), 'nothing of the closed configuration after the close');
    assert.ok(rt.sim.requests.some((r) => r.path === SESSIONS_PATH));
  });
});
