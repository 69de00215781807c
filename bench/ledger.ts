/**
 * `npm run bench -- --ledger`: the books at size. CPU per event (a session's
 * started, updated and ended) with 10 000 records in the store against a
 * store that is nearly empty, side by side in the same run and rounds; and the
 * time to report and to export a month of 10 000 sessions. Both ledgers keep
 * their books in localfilesystem (its cache; the disk write is on its 30 s
 * timer, measured apart as the size it writes).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { BenchContext } from './measure';
import { median, spread } from './measure';
import { QUICK } from './options';

const SIZE = QUICK ? 2_000 : 10_000;
const ROUNDS = QUICK ? 2 : 5;
const PER_ROUND = QUICK ? 100 : 300;
const MONTH_START = Date.parse('2026-03-01T00:00:00Z');
const MONTH_MS = 27 * 86_400_000;

function events(n: number, total: number, token: string): Array<Record<string, unknown>> {
  const start = MONTH_START + Math.floor((n / total) * MONTH_MS);
  const base = { transactionId: `TX-${token}-${n}`, cdrId: `C-${token}-${n}`, token: `RFID-${n % 50}`, locationId: 'L', evseId: '1', meterStart: 1000, startedAt: new Date(start).toISOString() };
  const at = (min: number) => new Date(start + min * 60_000).toISOString().replace(/Z$/, '');
  return [
    { event: 'started', session: { ...base, meterEnd: 1000, updatedAt: at(0) } },
    { event: 'updated', session: { ...base, meterEnd: 6000, updatedAt: at(30) } },
    { event: 'ended', session: { ...base, meterEnd: 12000, updatedAt: at(60) } },
  ];
}

export async function ledgerSection(ctx: BenchContext): Promise<string> {
  const { red } = ctx;
  const tariffs = JSON.stringify([{ id: 't', currency: 'EUR', pricePerKWh: 0.3, windows: [{ days: 'mon-fri', from: '22:00', to: '06:00', pricePerKWh: 0.2 }] }]);
  const ledger = (id: string) => ({ id, type: 'charging-ledger', z: 'lt', contextStore: 'file', timeZone: 'Europe/Berlin', tariffs, defaultTariff: 't', wires: [['sink'], ['sink']] });
  await red.deploy([{ id: 'lt', type: 'tab', label: 'ledger' }, ledger('full'), ledger('small'), { id: 'sink', type: 'bench-sink', z: 'lt', wires: [] }]);
  const waiting = new Map<number, (m: Record<string, unknown>) => void>();
  let seq = 0;
  red.onSink((m) => {
    const done = waiting.get(m._bench as number);
    if (done) done(m);
  });
  /** The answer to a command: it comes after every message sent before it (one at a time per node). */
  const ask = (id: string, topic: string, payload: unknown) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const n = ++seq;
      waiting.set(n, resolve);
      red.node(id).receive({ _bench: n, topic, payload });
    });
  const feed = async (id: string, from: number, count: number, total: number) => {
    for (let i = from; i < from + count; i++) for (const e of events(i, total, id)) red.node(id).receive(e);
    await ask(id, 'report', { month: '1999-01' });
  };
  for (let i = 0; i < SIZE; i += 1000) await feed('full', i, Math.min(1000, SIZE - i), SIZE);
  const perEvent = { full: [] as number[], small: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const id of r % 2 ? (['full', 'small'] as const) : (['small', 'full'] as const)) {
      global.gc?.();
      const from = id === 'full' ? SIZE + r * PER_ROUND : r * PER_ROUND;
      const cpu0 = process.cpuUsage();
      await feed(id, from, PER_ROUND, SIZE);
      const cpu = process.cpuUsage(cpu0);
      perEvent[id].push((cpu.user + cpu.system) / (PER_ROUND * 3));
    }
  }
  const timed = async (f: () => Promise<unknown>) => {
    const ms: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = performance.now();
      await f();
      ms.push(performance.now() - t0);
    }
    return ms;
  };
  const report = await timed(() => ask('full', 'report', { month: '2026-03' }));
  const exportCsv = await timed(() => ask('full', 'export', { month: '2026-03' }));
  const check = (await ask('full', 'report', { month: '2026-03' })).payload as { sessions: number };
  const ratio = perEvent.full.map((f, i) => f / perEvent.small[i]);
  const file = path.join(red.dir, 'context', 'lt', 'flow.json');
  const bytes = fs.existsSync(file) ? fs.statSync(file).size : null;
  return [
    `## The ledger (--ledger): ${SIZE} records in the books`,
    '',
    `${ROUNDS} rounds of ${PER_ROUND} sessions (started, updated, ended: ${PER_ROUND * 3} events), the two ledgers alternately first; median [min–max].`,
    '',
    '| measure | value |',
    '|---|---|',
    `| CPU per event, ${SIZE} records in the store (µs) | ${spread(perEvent.full, 1)} |`,
    `| CPU per event, under ${ROUNDS * PER_ROUND} records (µs) | ${spread(perEvent.small, 1)} |`,
    `| ratio full / small, per round | ${spread(ratio, 2)} |`,
    `| report of a month of ${check.sessions} sessions (ms) | ${spread(report, 1)} |`,
    `| export (CSV) of that month (ms) | ${spread(exportCsv, 1)} |`,
    `| the flow context file localfilesystem writes every 30 s | ${bytes === null ? 'not written yet' : `${(bytes / 2 ** 20).toFixed(1)} MiB`} |`,
    '',
    `Median CPU per event: ${median(perEvent.full).toFixed(1)} µs with ${SIZE} records, ${median(perEvent.small).toFixed(1)} µs nearly empty.`,
  ].join('\n');
}
