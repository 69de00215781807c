/**
 * docs/grafana-dashboard.json against the metrics the package exposes: every
 * expression names metrics that exist (with a histogram's _bucket, _sum and
 * _count), matches and groups by labels those metrics have, uses PromQL
 * functions that exist, and is balanced; the panels fit Grafana's 24-column
 * grid without overlapping. A renamed metric or label fails here, not on an
 * operator's screen.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ChargingMetrics } from '../../nodes/lib/metrics/registry';

interface Panel {
  id: number;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets: Array<{ expr: string }>;
}

const DASHBOARD = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'grafana-dashboard.json'), 'utf8')) as {
  panels: Panel[];
  templating: { list: Array<{ definition: string }> };
};
const FUNCTIONS = new Set(['sum', 'min', 'max', 'rate', 'increase', 'histogram_quantile', 'clamp_min', 'label_values']);
/** Labels Prometheus adds to every scraped series. */
const TARGET_LABELS = ['instance', 'job'];

/** Every metric with its label names, from a registry with a sample in every one. */
async function exposed(): Promise<Map<string, Set<string>>> {
  const m = new ChargingMetrics();
  const c = m.configuration('all', 'id');
  c.finished('start', null, 0.1);
  c.finished('start', 'TIMEOUT', 0.1);
  c.retried('start');
  c.throttled('start');
  c.budgetWaited(0.1);
  c.renewed();
  c.failed('AUTH');
  c.emitted('started');
  c.read('watch', () => ({ watched: 1, charging: 1 }));
  c.read('control', () => ({ idle: 1 }));
  c.read('coordination', () => ({ leasesHeld: 1, replicas: 1, redisUp: true, redisRoundTripSeconds: 0.001, standDowns: 0 }));
  c.read('depot', () => ({ depot: 'd', inUse: 1, waiting: 1, usedKW: 11, limit: 2, budgetKW: 22 }));
  const json = (await m.scrape('json')).body as Record<string, { type: string; values: Array<{ labels: Record<string, string>; metricName?: string }> }>;
  const out = new Map<string, Set<string>>();
  for (const [name, metric] of Object.entries(json)) {
    assert.ok(metric.values.length > 0, `${name} has a sample to read its labels from`);
    for (const v of metric.values) {
      const series = v.metricName ?? name;
      const labels = out.get(series) ?? new Set<string>();
      for (const l of Object.keys(v.labels)) labels.add(l);
      out.set(series, labels);
    }
  }
  c.close();
  return out;
}

describe('docs/grafana-dashboard.json', () => {
  const exprs = [...DASHBOARD.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr }))), ...DASHBOARD.templating.list.map((v) => ({ panel: 'variable', expr: v.definition }))];

  it('every expression names metrics that exist, with labels they have, and PromQL functions that exist', async () => {
    const metrics = await exposed();
    for (const { panel, expr } of exprs) {
      const names = [...expr.matchAll(/\bchargectl_[a-z_]+/g)].map((m) => m[0]);
      assert.ok(names.length > 0, `${panel}: ${expr}`);
      const known = new Set([...names.flatMap((n) => [...(metrics.get(n) ?? [])]), ...TARGET_LABELS]);
      for (const n of names) assert.ok(metrics.has(n), `${panel}: ${n} is not a metric`);
      for (const m of expr.matchAll(/([a-z_]+)\s*(?:=~|!=|!~|=)\s*"/g)) assert.ok(known.has(m[1]), `${panel}: label ${m[1]} in ${expr}`);
      for (const m of expr.matchAll(/\bby \(([^)]*)\)/g)) for (const l of m[1].split(',').map((x) => x.trim())) assert.ok(known.has(l), `${panel}: by ${l} in ${expr}`);
      for (const m of expr.matchAll(/\b([a-z_]+)\s*\(/g)) if (m[1] !== 'by') assert.ok(FUNCTIONS.has(m[1]), `${panel}: function ${m[1]}`);
      const depth = { '(': 0, '{': 0, '[': 0 };
      const close: Record<string, keyof typeof depth> = { ')': '(', '}': '{', ']': '[' };
      for (const ch of expr) {
        if (ch in depth) depth[ch as keyof typeof depth]++;
        else if (ch in close) assert.ok(--depth[close[ch]] >= 0, `${panel}: unbalanced ${ch}`);
      }
      assert.deepEqual(depth, { '(': 0, '{': 0, '[': 0 }, `${panel}: unbalanced`);
    }
  });

  it('its panels have unique ids and fit the 24-column grid without overlapping', () => {
    const ids = new Set<number>();
    const cells = new Set<string>();
    for (const p of DASHBOARD.panels) {
      assert.ok(!ids.has(p.id), `panel id ${p.id} twice`);
      ids.add(p.id);
      const { x, y, w, h } = p.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24, `${p.title} is outside the grid`);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          assert.ok(!cells.has(`${i},${j}`), `${p.title} overlaps another panel`);
          cells.add(`${i},${j}`);
        }
      }
    }
  });
});
