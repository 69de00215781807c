/**
 * Every metric of this package (names start with chargectl_; docs/metrics.md
 * says what each means), in the registry of our own, all read at scrape
 * time: counters and histograms from the numbers the live configurations
 * keep (configuration.ts), gauges and counters kept elsewhere (stand-downs)
 * from the figures of one scrape (figures.ts). No timer; nothing of
 * prom-client runs per request.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { FigureKind, Figures, Snapshot } from './figures';
import { CODE, KIND, ROW, type ConfigurationMetrics, type Tally } from './configuration';
import { ERROR_CODES, REQUEST_KINDS, WATCH_EVENTS } from './labels';

export type Labels = Record<string, string>;

/** A counter kept by the configurations: per configuration label, each series's labels and count (0s left out: never counted). */
interface Kept {
  name: string;
  help: string;
  labelNames: string[];
  series(c: ConfigurationMetrics): Array<[Labels, number]>;
}

const perKind = (values: Float64Array): Array<[Labels, number]> => REQUEST_KINDS.map((kind, k) => [{ kind }, values[k]]);

const KEPT: Kept[] = [
  {
    name: 'chargectl_requests_total',
    help: 'Requests to the charging service and its token endpoint, by kind (token, start, stop, progress) and how each ended (outcome ok, error, or cancelled by a redeploy; code: the error code, none when ok); a request is a message\'s whole journey, its retries included',
    labelNames: ['kind', 'outcome', 'code'],
    series: (c) =>
      REQUEST_KINDS.flatMap((kind): Array<[Labels, number]> => [
        [{ kind, outcome: 'ok', code: 'none' }, c.requests[KIND[kind] * ROW]],
        // A request its node or configuration abandoned (CLOSED, a redeploy) did not fail: it is "cancelled", not an error.
        ...ERROR_CODES.map((code): [Labels, number] => [{ kind, outcome: code === 'CLOSED' ? 'cancelled' : 'error', code }, c.requests[KIND[kind] * ROW + 1 + CODE[code]]]),
      ]),
  },
  { name: 'chargectl_request_retries_total', help: 'Attempts made again after a failed one (a new token after a 401, a pause after a 429, 5xx or a connection refused)', labelNames: ['kind'], series: (c) => perKind(c.retries) },
  { name: 'chargectl_throttled_total', help: 'Answers 429 Too Many Requests from the service or its token endpoint', labelNames: ['kind'], series: (c) => perKind(c.throttles) },
  { name: 'chargectl_token_renewals_total', help: 'Access tokens taken into use (the first one and every renewal)', labelNames: [], series: (c) => [[{}, c.renewals]] },
  { name: 'chargectl_token_failures_total', help: 'Failures to get an access token, and fresh tokens the service refused, by error code', labelNames: ['code'], series: (c) => ERROR_CODES.map((code) => [{ code }, c.tokenFailures[CODE[code]]]) },
  { name: 'chargectl_watch_events_total', help: 'Events sent by watch nodes (pending, started, updated, ended, poll)', labelNames: ['event'], series: (c) => WATCH_EVENTS.map((event, e) => [{ event }, c.events[e]]) },
];

/** A histogram kept by the configurations: its tallies per configuration and labels. */
interface KeptHistogram {
  name: string;
  help: string;
  tallies(c: ConfigurationMetrics): Array<[Labels, Tally]>;
}

const HISTOGRAMS: KeptHistogram[] = [
  {
    name: 'chargectl_request_duration_seconds',
    help: 'How long requests took from the call to the answer or the error, waits for a connection, the request budget, the token and retries included',
    tallies: (c) => REQUEST_KINDS.map((kind, k) => [{ kind }, c.durations[k]]),
  },
  {
    name: 'chargectl_budget_wait_seconds',
    help: 'How long requests that had to wait waited for their place in Max requests per second (this replica\'s budget and, with replicas, the fleet\'s)',
    tallies: (c) => [[{}, c.budgetWait]],
  },
];

/** The counters and histograms the configurations keep, read from the live ones at each scrape. */
export function kept(registry: Registry, live: () => Iterable<ConfigurationMetrics>): void {
  for (const def of KEPT) {
    new Counter({
      name: def.name,
      help: def.help,
      labelNames: ['config', ...def.labelNames],
      registers: [registry],
      collect(this: Counter<string>) {
        this.reset();
        // Configurations of one label add up: inc sums the same labels.
        for (const c of live()) for (const [labels, value] of def.series(c)) if (value > 0) this.inc({ config: c.label, ...labels }, value);
      },
    });
  }
  for (const def of HISTOGRAMS) registry.registerMetric(histogramView(def, live) as never);
}

/**
 * A histogram from the configurations' tallies, as prom-client's registry
 * reads any metric (get(): name, help, type, values with metricName and
 * labels): cumulative buckets with le, +Inf, _sum and _count per series.
 */
function histogramView(def: KeptHistogram, live: () => Iterable<ConfigurationMetrics>) {
  return {
    name: def.name,
    help: def.help,
    type: 'histogram',
    aggregator: 'sum',
    reset: () => undefined,
    get: async () => {
      const merged = new Map<string, { labels: Labels; bounds: readonly number[]; counts: number[]; sum: number; count: number }>();
      for (const c of live()) {
        for (const [labels, t] of def.tallies(c)) {
          if (t.count === 0) continue;
          const all = { config: c.label, ...labels };
          const key = JSON.stringify(all);
          const m = merged.get(key) ?? { labels: all, bounds: t.bounds, counts: new Array<number>(t.bounds.length).fill(0), sum: 0, count: 0 };
          for (let i = 0; i < t.bounds.length; i++) m.counts[i] += t.counts[i];
          m.sum += t.sum;
          m.count += t.count;
          merged.set(key, m);
        }
      }
      const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
      for (const m of merged.values()) {
        let cumulative = 0;
        m.bounds.forEach((le, i) => values.push({ metricName: `${def.name}_bucket`, labels: { le, ...m.labels }, value: (cumulative += m.counts[i]) }));
        values.push({ metricName: `${def.name}_bucket`, labels: { le: '+Inf', ...m.labels }, value: m.count });
        values.push({ metricName: `${def.name}_sum`, labels: m.labels, value: m.sum });
        values.push({ metricName: `${def.name}_count`, labels: m.labels, value: m.count });
      }
      return { name: def.name, help: def.help, type: 'histogram', aggregator: 'sum', values };
    },
  };
}

/** One series of a reader's figures: its value (undefined: the reader could not say) and its labels besides config. */
type Point = { value: number | undefined; labels?: Labels };

interface Collected<K extends FigureKind> {
  name: string;
  help: string;
  type: 'gauge' | 'counter';
  kind: K;
  labelNames?: string[];
  points(f: Figures[K]): Point[];
  /** how the readers of one configuration add up: its watch nodes' figures are summed, its Redis is down if any says so */
  combine: 'sum' | 'min' | 'max';
}

const num = (v: boolean | number | undefined): number | undefined => (v === undefined ? undefined : typeof v === 'boolean' ? (v ? 1 : 0) : v);

/** A charging-depot's gauges, from the table its last operation answered. */
const DEPOT_GAUGES = {
  inUse: { name: 'chargectl_depot_in_use', help: 'Connectors a charging-depot counts as charging (granted, or a session started at the station)' },
  waiting: { name: 'chargectl_depot_waiting', help: 'Connectors queued for a charging-depot\'s slot' },
  limit: { name: 'chargectl_depot_limit', help: 'A charging-depot\'s limit of connectors at once (absent: none set)' },
  usedKW: { name: 'chargectl_depot_used_kw', help: 'The kW a charging-depot counts (measured, or assumed until measured)' },
  budgetKW: { name: 'chargectl_depot_budget_kw', help: 'A charging-depot\'s kW budget (absent: none set)' },
} as const;

/** Read at scrape time. */
const COLLECTED: Array<Collected<FigureKind>> = [
  row({ name: 'chargectl_watched_sessions', help: 'Tokens the watch nodes poll from this replica', type: 'gauge', kind: 'watch', combine: 'sum', points: (f) => [{ value: f.watched }] }),
  row({ name: 'chargectl_sessions_charging', help: 'Watched tokens whose session has started (a transaction) and not ended', type: 'gauge', kind: 'watch', combine: 'sum', points: (f) => [{ value: f.charging }] }),
  row({
    name: 'chargectl_control_targets',
    help: 'Connectors kept by charging-control nodes on this replica, by the state each is in (its first check done)',
    type: 'gauge',
    kind: 'control',
    labelNames: ['state'],
    combine: 'sum',
    points: (f) => Object.entries(f).map(([state, value]) => ({ value, labels: { state } })),
  }),
  row({ name: 'chargectl_fleet_leases_held', help: 'Leases this replica holds for the watch and control nodes of the configuration (Coordinate replicas)', type: 'gauge', kind: 'coordination', combine: 'sum', points: (f) => [{ value: f.leasesHeld }] }),
  row({ name: 'chargectl_fleet_replicas', help: 'Replicas alive in the fleet at the last heartbeat, this one included (Coordinate replicas)', type: 'gauge', kind: 'coordination', combine: 'max', points: (f) => [{ value: f.replicas }] }),
  row({ name: 'chargectl_redis_up', help: '1 while Redis answers this replica, 0 while it does not (Coordinate replicas)', type: 'gauge', kind: 'coordination', combine: 'min', points: (f) => [{ value: num(f.redisUp) }] }),
  row({ name: 'chargectl_redis_round_trip_seconds', help: 'The round trip of this replica\'s last heartbeat to Redis; absent while Redis does not answer (Coordinate replicas)', type: 'gauge', kind: 'coordination', combine: 'max', points: (f) => [{ value: f.redisRoundTripSeconds }] }),
  ...(['inUse', 'waiting', 'limit', 'usedKW', 'budgetKW'] as const).map((k) =>
    row({
      name: DEPOT_GAUGES[k].name,
      help: DEPOT_GAUGES[k].help,
      type: 'gauge',
      kind: 'depot',
      labelNames: ['depot'],
      combine: 'max',
      points: (f) => [{ value: f[k], labels: { depot: f.depot } }],
    }),
  ),
  row({ name: 'chargectl_fleet_stand_downs_total', help: 'Times a watch node gave this replica\'s share of its tokens to the others because it could not reach the service (Coordinate replicas)', type: 'counter', kind: 'coordination', combine: 'sum', points: (f) => [{ value: f.standDowns }] }),
];

function row<K extends FigureKind>(c: Collected<K>): Collected<FigureKind> {
  return c as unknown as Collected<FigureKind>;
}

/** Registers the gauges (and collected counters), each reading the snapshot of the scrape under way. */
export function collected(registry: Registry, snapshot: () => Snapshot): void {
  for (const def of COLLECTED) {
    const labelNames = ['config', ...(def.labelNames ?? [])];
    const collect = function (this: Gauge<string> | Counter<string>) {
      this.reset();
      for (const [config, labels, value] of series(def, snapshot())) {
        if (this instanceof Gauge) this.set({ ...labels, config }, value);
        else this.inc({ ...labels, config }, value);
      }
    };
    const options = { name: def.name, help: def.help, labelNames, registers: [registry], collect };
    if (def.type === 'gauge') new Gauge(options);
    else new Counter(options);
  }
}

/** The series of one collected metric: per configuration and labels, its readers' values combined; left out when any reader failed or none could say. */
function series(def: Collected<FigureKind>, snap: Snapshot): Array<[string, Labels, number]> {
  const out: Array<[string, Labels, number]> = [];
  for (const [config, kinds] of snap) {
    const figures = kinds[def.kind];
    if (!figures) continue;
    const byLabels = new Map<string, { labels: Labels; values: number[] }>();
    for (const f of figures) {
      for (const p of def.points(f)) {
        if (typeof p.value !== 'number' || !Number.isFinite(p.value) || (def.type === 'counter' && p.value < 0)) continue;
        const key = JSON.stringify(p.labels ?? {});
        const entry = byLabels.get(key) ?? { labels: p.labels ?? {}, values: [] };
        entry.values.push(p.value);
        byLabels.set(key, entry);
      }
    }
    for (const { labels, values } of byLabels.values()) out.push([config, labels, combine(def.combine, values)]);
  }
  return out;
}

function combine(how: 'sum' | 'min' | 'max', values: number[]): number {
  if (how === 'min') return Math.min(...values);
  if (how === 'max') return Math.max(...values);
  return values.reduce((a, b) => a + b, 0);
}
