/**
 * A strict reader of the Prometheus text exposition format 0.0.4, as the
 * Prometheus server reads it (prometheus.io/docs/instrumenting/exposition_formats,
 * and the text parser in prometheus/common's expfmt), for the tests: every line a
 * comment, HELP, TYPE or sample; metric and label names by their grammar,
 * only the three escapes, Go float values; HELP and TYPE at most once per
 * family and TYPE before its samples; a family's lines together; no series
 * twice; no label twice; histograms whole (le on every bucket, cumulative,
 * +Inf equal to _count, _sum and _count there); counters never negative; the
 * text ends with a newline. prom-client has no reader, and the one on npm
 * (parse-prometheus-text-format) accepts what Prometheus refuses (it has not
 * been released since 2019): a test that reads our text must be able to fail.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help?: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** A Go ParseFloat value as the text format allows it. */
function parseValue(text: string, where: string): number {
  if (/^[+-]?Inf$/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/^NaN$/i.test(text)) return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new Error(`${where}: "${text}" is not a number`);
  return Number(text);
}

/** The family a sample belongs to: for a histogram x, x_bucket, x_sum and x_count are x's. */
function familyOf(name: string, types: Map<string, string>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const t = types.get(base);
      if (t === 'histogram' || (t === 'summary' && suffix !== '_bucket')) return base;
    }
  }
  return name;
}

/** A HELP text: only \\ and \n are escapes there. */
function unescapeHelp(text: string, where: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '\\') {
      out += text[i];
      continue;
    }
    const next = text[++i];
    if (next === '\\') out += '\\';
    else if (next === 'n') out += '\n';
    else throw new Error(`${where}: bad escape \\${next ?? ''}`);
  }
  return out;
}

/** Reads one sample line: name, labels, value, an optional timestamp. */
function parseSample(line: string, where: string): Sample {
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ') i++;
  const name = line.slice(0, i);
  if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name "${name}"`);
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    while (line[i] !== '}') {
      const eq = line.indexOf('=', i);
      if (eq < 0) throw new Error(`${where}: a label without "="`);
      const label = line.slice(i, eq);
      if (!LABEL_NAME.test(label) || label.startsWith('__')) throw new Error(`${where}: bad label name "${label}"`);
      if (Object.hasOwn(labels, label)) throw new Error(`${where}: label ${label} twice`);
      if (line[eq + 1] !== '"') throw new Error(`${where}: label ${label}'s value is not quoted`);
      let value = '';
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\') {
          const next = line[++j];
          if (next === '\\') value += '\\';
          else if (next === '"') value += '"';
          else if (next === 'n') value += '\n';
          else throw new Error(`${where}: bad escape \\${next ?? ''} in label ${label}`);
        } else value += line[j];
      }
      if (j >= line.length) throw new Error(`${where}: label ${label}'s value is not closed`);
      labels[label] = value;
      i = j + 1;
      if (line[i] === ',') i++;
      else if (line[i] !== '}') throw new Error(`${where}: expected "," or "}" after label ${label}`);
    }
    i++;
  }
  if (line[i] !== ' ') throw new Error(`${where}: no space before the value`);
  const rest = line.slice(i + 1).split(' ');
  if (rest.length > 2 || rest.some((r) => r === '')) throw new Error(`${where}: expected a value and at most a timestamp`);
  if (rest[1] !== undefined && !/^-?\d+$/.test(rest[1])) throw new Error(`${where}: bad timestamp`);
  return { name, labels, value: parseValue(rest[0], where) };
}

/** Reads a whole exposition; throws on the first thing Prometheus would refuse. */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const families = new Map<string, Family>();
  const types = new Map<string, string>();
  const closed = new Set<string>();
  const series = new Set<string>();
  let current: string | null = null;
  const enter = (name: string, where: string): Family => {
    if (current !== name) {
      if (closed.has(name)) throw new Error(`${where}: the lines of ${name} are not together`);
      if (current) closed.add(current);
      current = name;
    }
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, type: 'untyped', samples: [] }));
    return f;
  };
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((line, n) => {
    const where = `line ${n + 1}`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return; // a plain comment
      const [, what, name, rest = ''] = m;
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name "${name}"`);
      const f = enter(name, where);
      if (what === 'HELP') {
        if (f.help !== undefined) throw new Error(`${where}: HELP of ${name} twice`);
        f.help = unescapeHelp(rest, `${where}: HELP of ${name}`);
      } else {
        if (types.has(name)) throw new Error(`${where}: TYPE of ${name} twice`);
        if (f.samples.length > 0) throw new Error(`${where}: TYPE of ${name} after its samples`);
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type "${rest}"`);
        types.set(name, rest);
        f.type = rest as Family['type'];
      }
      return;
    }
    const sample = parseSample(line, where);
    const f = enter(familyOf(sample.name, types), where);
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (series.has(key)) throw new Error(`${where}: the series ${sample.name} with these labels twice`);
    series.add(key);
    if (f.type === 'counter' && !(sample.value >= 0)) throw new Error(`${where}: counter ${sample.name} is ${sample.value}`);
    f.samples.push(sample);
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

/** Every series of a histogram: buckets with le, cumulative, +Inf equal to _count, and _sum and _count present. */
function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}: a bucket without le`);
      g.buckets.push([parseValue(le, `${f.name} le`), s.value]);
    } else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new Error(`${f.name}: a sample ${s.name} in a histogram`);
  }
  for (const [key, g] of groups) {
    const b = [...g.buckets].sort((x, y) => x[0] - y[0]);
    if (b.length === 0 || b.at(-1)?.[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    for (let i = 1; i < b.length; i++) if (b[i][1] < b[i - 1][1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
    if (g.count === undefined || g.sum === undefined) throw new Error(`${f.name}${key}: no _sum or _count`);
    if (b.at(-1)?.[1] !== g.count) throw new Error(`${f.name}${key}: +Inf bucket ${b.at(-1)?.[1]} is not _count ${g.count}`);
  }
}

/** The value of one series, or undefined when absent: `labels` must match exactly the sample's labels. */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string>): number | undefined {
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      const keys = Object.keys(s.labels);
      if (keys.length === Object.keys(labels).length && keys.every((k) => s.labels[k] === labels[k])) return s.value;
    }
  }
  return undefined;
}
