/**
 * nodes/lib/metrics without Node-RED: labels stay bounded and free of
 * secrets, a configuration's series live exactly as long as it does, a reader
 * that fails is left out rather than faked, registries never clash, and the
 * client tells what it did (against the simulator over HTTP). The strict
 * exposition reader the tests rely on refuses what Prometheus refuses.
 */
import assert from 'node:assert/strict';
import { ChargingMetrics } from '../../../nodes/lib/metrics/registry';
import { configurationLabel, MAX_LABEL_CHARS } from '../../../nodes/lib/metrics/labels';
import { responseHeaders, scrapeFormat } from '../../../nodes/lib/metrics/exposition';
import { ChargingError } from '../../../nodes/lib/errors';
import { clientFor, freePort, rejection, startSimulator } from '../../harness';
import { parsePrometheusText, valueOf } from '../../prometheus-text';

const text = async (m: ChargingMetrics) => parsePrometheusText((await m.scrape('text')).body as string);

describe('metrics: labels, series and readers (nodes/lib/metrics)', () => {
  it('a configuration label: the name as typed, credentials of a URL-like name out, control characters out, cut after that; the id when unnamed', () => {
    assert.equal(configurationLabel('Depot north', 'abc'), 'Depot north');
    assert.equal(configurationLabel('  ', 'abc'), 'abc');
    assert.equal(configurationLabel(undefined, 'abc'), 'abc');
    assert.equal(configurationLabel('https://user:pa55@host.example/x and //a@b', 'abc'), 'https://host.example/x and //b');
    assert.equal(configurationLabel('line\nbreak\u0007bell', 'abc'), 'line break bell');
    // The secret sits across the cut: redacted first, so no part of it is left.
    const long = `${'x'.repeat(MAX_LABEL_CHARS - 20)} https://ops:very-secret-password-here@h`;
    const label = configurationLabel(long, 'abc');
    assert.ok([...label].length <= MAX_LABEL_CHARS && !label.includes('very') && !label.includes('ops'), label);
    assert.equal([...configurationLabel('🔌'.repeat(100), 'abc')].length, MAX_LABEL_CHARS, 'cut in characters, never inside one');
  });

  it('msg.format and the response headers', () => {
    assert.equal(scrapeFormat(undefined), 'text');
    assert.equal(scrapeFormat(' Prometheus '), 'text');
    assert.equal(scrapeFormat('JSON'), 'json');
    for (const bad of ['xml', 1, {}, []]) assert.throws(() => scrapeFormat(bad), (e: ChargingError) => e.code === 'INVALID_INPUT' && e.field === 'format');
    assert.deepEqual(responseHeaders({ 'Content-Type': 'text/html', 'content-LENGTH': 5, 'cache-control': 'no-store' }, 'x/y'), { 'cache-control': 'no-store', 'content-type': 'x/y' });
    assert.deepEqual(responseHeaders('nonsense', 'x/y'), { 'content-type': 'x/y' });
  });

  it('registries of their own: many in one process never clash, and none touches prom-client\'s default registry', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const promClient = require('prom-client') as typeof import('prom-client');
    const before = (await promClient.register.getMetricsAsJSON()).length;
    const all = Array.from({ length: 5 }, () => new ChargingMetrics());
    for (const m of all) m.configuration('same', 'id').finished('progress', null, 0.01);
    for (const m of all) assert.equal(valueOf(await text(m), 'chargectl_requests_total', { config: 'same', kind: 'progress', outcome: 'ok', code: 'none' }), 1);
    assert.equal((await promClient.register.getMetricsAsJSON()).length, before);
  });

  it('a configuration\'s series live as long as it does; two of one name add up; a closed one counts nothing', async () => {
    const m = new ChargingMetrics();
    const a = m.configuration('depot', 'a');
    const b = m.configuration('depot', 'b');
    a.finished('start', null, 0.2);
    b.finished('start', 'OUTCOME_UNKNOWN', 10);
    b.failed('AUTH');
    let s = await text(m);
    assert.equal(valueOf(s, 'chargectl_request_duration_seconds_count', { config: 'depot', kind: 'start' }), 2, 'two configurations of one name add up');
    a.close();
    a.finished('start', null, 0.2); // a request that ended in the close grace
    s = await text(m);
    assert.equal(valueOf(s, 'chargectl_request_duration_seconds_count', { config: 'depot', kind: 'start' }), 1, 'b\'s own; a\'s left with it, and nothing was counted after it closed');
    b.close();
    const after = await m.scrape('text');
    assert.equal(after.samples, 0, 'no series left behind');
    assert.equal(b.read('watch', () => ({ watched: 1, charging: 1 }))(), undefined, 'a closed configuration reads nothing');
  });

  it('a reader that throws, or a figure that is not a number, is left out; the rest is read', async () => {
    const m = new ChargingMetrics();
    const good = m.configuration('good', 'g');
    const bad = m.configuration('bad', 'b');
    good.read('watch', () => ({ watched: 2, charging: 1 }));
    good.read('watch', () => ({ watched: 3, charging: 0 }));
    bad.read('watch', () => ({ watched: 5, charging: 5 }));
    bad.read('watch', () => {
      throw new Error('closing');
    });
    bad.read('control', () => ({ idle: 1, charging: Number.NaN }));
    bad.read('coordination', () => ({ redisUp: false, leasesHeld: 4 }));
    const s = await text(m);
    assert.equal(valueOf(s, 'chargectl_watched_sessions', { config: 'good' }), 5, 'two watch nodes of one configuration add up');
    assert.equal(valueOf(s, 'chargectl_sessions_charging', { config: 'good' }), 1);
    assert.equal(valueOf(s, 'chargectl_watched_sessions', { config: 'bad' }), undefined, 'one reader failed: the figure is not made of the other alone');
    assert.equal(valueOf(s, 'chargectl_control_targets', { config: 'bad', state: 'idle' }), 1);
    assert.equal(valueOf(s, 'chargectl_control_targets', { config: 'bad', state: 'charging' }), undefined);
    assert.equal(valueOf(s, 'chargectl_redis_up', { config: 'bad' }), 0);
    assert.equal(valueOf(s, 'chargectl_redis_round_trip_seconds', { config: 'bad' }), undefined);
    assert.equal(valueOf(s, 'chargectl_fleet_leases_held', { config: 'bad' }), 4);
    const json = (await m.scrape('json')).body as Record<string, { values: Array<{ labels: Record<string, string>; value: number }> }>;
    assert.deepEqual(json.chargectl_watched_sessions.values.map((v) => [v.labels.config, v.value]), [['good', 5]]);
  });

  it('the client tells what it did: a token failure with its code, a START, a query cancelled by a close; a fenced poll that was never sent is not a request', async () => {
    const sim = await startSimulator();
    const m = new ChargingMetrics();
    const cfg = m.configuration('sim', 'x');
    const refused = clientFor(sim, { authUrl: `http://127.0.0.1:${await freePort()}`, metrics: cfg, retry: { tokenAttempts: 1 } });
    const client = clientFor(sim, { metrics: cfg });
    try {
      assert.equal((await rejection(refused.getProgress('T-1'))).code, 'NETWORK');
      await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'T-2' });
      const fenced = await rejection(client.getProgress('T-2', { mayProceed: () => false }));
      assert.match(fenced.message, /nothing was sent/);
      // Abandoned by its node's close (a redeploy): cancelled, not an error.
      sim.inject({ target: 'get', kind: 'latency', delayMs: 2000 });
      const closing = new AbortController();
      const abandoned = client.getProgress('T-3', { signal: closing.signal });
      setTimeout(() => closing.abort(), 50);
      assert.equal((await rejection(abandoned)).code, 'CLOSED');
      const s = await text(m);
      const v = (name: string, labels: Record<string, string>) => valueOf(s, name, { config: 'sim', ...labels });
      assert.equal(v('chargectl_token_failures_total', { code: 'NETWORK' }), 1);
      assert.equal(v('chargectl_requests_total', { kind: 'token', outcome: 'error', code: 'NETWORK' }), 1);
      assert.equal(v('chargectl_requests_total', { kind: 'progress', outcome: 'error', code: 'NETWORK' }), 1, 'the query that found no token');
      assert.equal(v('chargectl_requests_total', { kind: 'start', outcome: 'ok', code: 'none' }), 1);
      assert.equal(v('chargectl_requests_total', { kind: 'progress', outcome: 'cancelled', code: 'CLOSED' }), 1);
      assert.equal(v('chargectl_requests_total', { kind: 'progress', outcome: 'error', code: 'CLOSED' }), undefined);
      assert.equal(v('chargectl_request_duration_seconds_count', { kind: 'progress' }), 2, 'the fenced poll is not one');
      assert.equal(v('chargectl_token_renewals_total', {}), 1);
    } finally {
      await refused.close();
      await client.close();
      await sim.stop();
    }
  });
});

describe('the strict exposition reader (test/prometheus-text.ts) refuses what Prometheus refuses', () => {
  const ok = '# HELP a_total An "a"\\n\\\\.\n# TYPE a_total counter\na_total{x="1\\"\\n\\\\"} 3\n\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3.5\nh_count 2\n';

  it('reads a good one', () => {
    const f = parsePrometheusText(ok);
    assert.equal(f.get('a_total')?.help, 'An "a"\n\\.');
    assert.equal(valueOf(f, 'a_total', { x: '1"\n\\' }), 3);
    assert.equal(valueOf(f, 'h_count', {}), 2);
  });

  const bad: Array<[string, string]> = [
    ['no newline at the end', ok.slice(0, -1)],
    ['a bad escape in a label value', 'x{a="\\t"} 1\n'],
    ['a bad escape in HELP', '# HELP x a\\tb\nx 1\n'],
    ['a series twice', '# TYPE x gauge\nx{a="1"} 1\nx{a="1"} 2\n'],
    ['a label twice', 'x{a="1",a="2"} 1\n'],
    ['a reserved label name', 'x{__a="1"} 1\n'],
    ['a bad metric name', '1x 1\n'],
    ['not a number', 'x one\n'],
    ['TYPE after samples', 'x 1\n# TYPE x gauge\n'],
    ['TYPE twice', '# TYPE x gauge\n# TYPE x gauge\n'],
    ['a family split', '# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx{a="2"} 2\n'],
    ['a negative counter', '# TYPE x_total counter\nx_total -1\n'],
    ['a histogram without +Inf', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    ['a histogram not cumulative', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'],
    ['+Inf not _count', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n'],
    ['an unquoted label value', 'x{a=1} 1\n'],
    ['an unknown type', '# TYPE x meter\n'],
  ];
  for (const [why, input] of bad) {
    it(`refuses ${why}`, () => assert.throws(() => parsePrometheusText(input)));
  }
});
