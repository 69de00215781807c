/**
 * The month soak of charging-control (`npm run soak -- --control [--days 30]`):
 * three connectors, each behind its own simulator (faults there are the
 * connector's alone), each kept by the controller with the node's defaults
 * (check 30 s, wait 60 s, 2 STARTs, retry 600 s, guard 300 s) on a fake clock
 * that the simulators follow, every request real HTTP. Inputs as a home flow
 * sends them, day after day:
 *
 *   solar     MQTT surplus repeated every 60 s, on 10–16 h with passing clouds,
 *             onDelay 60 s / offDelay 120 s; the car plugged in late on some
 *             days; a 20-minute 503 outage every third day; the driver ends
 *             the session at the station at 15 h on some days
 *   cheap     power-saver: one on at 01 h, one off at 05 h; on some days the
 *             car arrives at 03 h, on others another card holds the connector
 *             until 02:30 (409: busy)
 *   dashboard a switch: on at 18 h with msg.energyLimit 15 kWh, off at 23 h
 *
 * Reports STARTs per connector per day, requests per hour, Catch errors per
 * episode (outage, busy), the most STARTs without a session in any retry
 * interval, and commands no wish or retry asked for (must be 0: exit 1 otherwise).
 */
import fs from 'node:fs';
import { ControlBook } from '../nodes/lib/control/book';
import type { ControlDeps } from '../nodes/lib/control/controller';
import type { ControlSettings } from '../nodes/lib/control/memory';
import { MemoryControlStore } from '../nodes/lib/control/store';
import { ServiceClient } from '../nodes/lib/client/service-client';
import { ChargingServiceSimulator } from '../simulator/simulator';
import { FakeClock } from '../test/lib/control/fake-clock';
import { rng } from './soak-faults';

export interface MonthSoakArgs {
  days: number;
  seed: number;
  out: string | null;
}

const DEFAULTS: ControlSettings = {
  guardMs: 300_000, checkMs: 30_000, confirmMs: 2_000, waitMs: 60_000, startAttempts: 2, stopAttempts: 3, enforce: false,
  retryMs: 600_000, onDelayMs: 0, offDelayMs: 0, energyLimitKWh: null,
};
const H = 3_600_000;
const DAY = 24 * H;

interface Event {
  at: number;
  run(): void | Promise<void>;
}

interface Connector {
  name: string;
  sim: ChargingServiceSimulator;
  client: ServiceClient;
  book: ControlBook;
  settings: ControlSettings;
  target: { locationId: string; evseId: string; token: string };
  /** the flow's last wish and since when; the wish in force (after the delays) */
  raw: { on: boolean; since: number; limit?: number } | null;
  inForce: boolean | null;
  /** the driver ended the session at the station: a START is unasked until an off then an on */
  endedByDriver: boolean;
  sends: Array<{ action: string; at: number; asked: boolean; why: string }>;
  startsPerDay: number[];
  errors: string[];
}

export async function soakControlMonth(args: MonthSoakArgs): Promise<boolean> {
  const random = rng(args.seed);
  const clock = new FakeClock();
  const t0 = clock.now();
  const episodes = { outages: 0, busy: 0 };
  const errorsIn = { outage: 0, busy: 0, other: 0 };
  let outageUntil: Record<string, number> = {};
  let busyUntil: Record<string, number> = {};

  async function connector(name: string, settings: Partial<ControlSettings>): Promise<Connector> {
    // The simulator follows the fake clock; the client's own waits (its retries' pauses) stay real and short.
    // Tokens outlive the run: a token renewal every 30 simulated minutes is not what is measured here.
    const sim = await new ChargingServiceSimulator({ startDelayMs: 2_000, stopDelayMs: 2_000, keepRequests: 0, tokenLifetimeSec: 90 * 86_400, now: () => clock.wall() }).start();
    const client = new ServiceClient({ baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: sim.options.clientId, clientSecret: sim.options.clientSecret, timeoutMs: 2_000, retry: { baseDelayMs: 1, maxDelayMs: 2 } });
    const c = { name, sim, client, settings: { ...DEFAULTS, ...settings }, target: { locationId: `MONTH-${name}`, evseId: '1', token: `MONTH-${name}` }, raw: null, inForce: null, endedByDriver: false, sends: [], startsPerDay: [], errors: [] } as unknown as Connector;
    const classify = (text: string) => {
      c.errors.push(text);
      const now = clock.now();
      if (now <= (outageUntil[name] ?? 0) + 10 * c.settings.checkMs) errorsIn.outage++;
      else if (now <= (busyUntil[name] ?? 0) + c.settings.retryMs) errorsIn.busy++;
      else errorsIn.other++;
    };
    const deps: ControlDeps = {
      poll: (t, priority) => client.getProgress(t.token, { priority }).then((r) => r.record),
      send: (cmd) => {
        note(c, cmd.action);
        return client.sendCommand(cmd);
      },
      store: new MemoryControlStore(),
      clock,
      track: clock.track,
      onState: () => undefined,
      onError: (_t, e) => classify(e.message),
    };
    c.book = new ControlBook(c.settings, deps);
    (c as unknown as { classify: typeof classify }).classify = classify;
    return c;
  }

  /** The wish in force as the flow sees it: the last one, once it has held its delay. */
  function ripen(c: Connector): void {
    if (!c.raw || c.raw.on === c.inForce) return;
    const delay = c.raw.on ? c.settings.onDelayMs : c.settings.offDelayMs;
    if (clock.now() - c.raw.since >= delay) {
      if (c.inForce === false && c.raw.on) c.endedByDriver = false;
      c.inForce = c.raw.on;
    }
  }

  function note(c: Connector, action: string): void {
    ripen(c);
    const day = Math.floor((clock.now() - t0) / DAY);
    let asked = false;
    let why = '';
    if (action === 'START') {
      c.startsPerDay[day] = (c.startsPerDay[day] ?? 0) + 1;
      asked = c.inForce === true && !c.endedByDriver;
      why = `wish in force ${String(c.inForce)}, ended by the driver ${String(c.endedByDriver)}`;
    } else {
      const s = c.sim.session(c.target.token);
      const kwh = s ? (Math.max(0, clock.wall() - s.startedAt) / H) * s.powerW / 1000 : 0;
      asked = c.inForce === false || (c.raw?.limit !== undefined && kwh >= c.raw.limit);
      why = `wish in force ${String(c.inForce)}, ${kwh.toFixed(2)} kWh`;
    }
    c.sends.push({ action, at: clock.now() - t0, asked, why });
  }

  async function wish(c: Connector, on: boolean, limit?: number): Promise<void> {
    if (!c.raw || c.raw.on !== on) c.raw = { on, since: clock.now(), limit };
    else if (limit !== undefined) c.raw.limit = limit;
    ripen(c);
    const err = await c.book.want(c.target, on, limit !== undefined ? { energyLimit: limit } : {});
    if (err) (c as unknown as { classify(t: string): void }).classify(err.message);
  }

  async function atStation(c: Connector, action: 'START' | 'STOP', token = c.target.token): Promise<void> {
    const s = c.sim.session(token);
    if (action === 'STOP' && !s?.transactionId) return;
    await c.client.sendCommand(action === 'START' ? { action, ...c.target, token } : { action, ...c.target, token, transactionId: s?.transactionId });
  }

  const solar = await connector('solar', { onDelayMs: 60_000, offDelayMs: 120_000 });
  const cheap = await connector('cheap', {});
  const dash = await connector('dashboard', {});
  const all = [solar, cheap, dash];
  const events: Event[] = [];
  const at = (day: number, ms: number, run: Event['run']) => events.push({ at: t0 + day * DAY + ms, run });

  for (let d = 0; d < args.days; d++) {
    // solar: the surplus every 60 s, on 10–16 h with clouds (off for 5–20 min, up to 4 a day)
    const clouds = Array.from({ length: Math.floor(random() * 5) }, () => {
      const from = 10 * H + random() * 6 * H;
      return [from, from + (5 + random() * 15) * 60_000];
    });
    for (let m = 0; m < 24 * 60; m++) {
      const t = m * 60_000;
      const sunny = t >= 10 * H && t < 16 * H && !clouds.some(([a, b]) => t >= a && t < b);
      at(d, t, () => wish(solar, sunny));
    }
    if (random() < 0.3) {
      // the car plugged in late: STARTs before then bring no session
      at(d, 9 * H, () => solar.sim.inject({ target: 'post', kind: 'ignore-start', times: Infinity }));
      at(d, 11 * H + random() * 2 * H, () => solar.sim.clearFaults());
    }
    if (random() < 0.3) at(d, 15 * H, async () => {
      await atStation(solar, 'STOP');
      if (solar.sim.session(solar.target.token)) solar.endedByDriver = true;
    });
    if (d % 3 === 1) {
      const from = 10 * H + random() * 5 * H;
      at(d, from, () => {
        episodes.outages++;
        outageUntil.solar = clock.now() + 20 * 60_000;
        solar.sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
      });
      at(d, from + 20 * 60_000, () => solar.sim.clearFaults());
    }
    // cheap: one on at 01 h, one off at 05 h; a car arriving at 03 h, or another card until 02:30
    const late = random() < 0.3;
    const busy = !late && random() < 0.3;
    if (late) {
      at(d, 0, () => cheap.sim.inject({ target: 'post', kind: 'ignore-start', times: Infinity }));
      at(d, 3 * H, () => cheap.sim.clearFaults());
    }
    if (busy) {
      at(d, 0.5 * H, () => atStation(cheap, 'START', 'ANOTHER-CARD'));
      at(d, H, () => {
        episodes.busy++;
        busyUntil.cheap = clock.now() + 1.5 * H;
      });
      at(d, 2.5 * H, () => atStation(cheap, 'STOP', 'ANOTHER-CARD'));
    }
    at(d, H, () => wish(cheap, true));
    at(d, 5 * H, () => wish(cheap, false));
    // dashboard: on with a 15 kWh limit at 18 h, off at 23 h
    at(d, 18 * H, () => wish(dash, true, 15));
    at(d, 23 * H, () => wish(dash, false));
  }
  events.sort((a, b) => a.at - b.at);

  const started = Date.now();
  const cpu = process.cpuUsage();
  for (const e of events) {
    if (e.at > clock.now()) await clock.advance(e.at - clock.now());
    await e.run();
  }
  await clock.advance(H);
  for (const c of all) c.book.close();

  const hours = args.days * 24;
  const unasked = all.flatMap((c) => c.sends.filter((s) => !s.asked).map((s) => ({ connector: c.name, ...s })));
  const maxStartsPerRetry = (c: Connector) => {
    const starts = c.sends.filter((s) => s.action === 'START').map((s) => s.at);
    return Math.max(0, ...starts.map((a) => starts.filter((b) => b >= a && b - a < c.settings.retryMs).length));
  };
  const rows: Array<[string, string]> = [
    ['date', new Date().toISOString()],
    ['simulated days', String(args.days)],
    ['wall-clock seconds', ((Date.now() - started) / 1000).toFixed(0)],
    ['cpu seconds', ((process.cpuUsage(cpu).user + process.cpuUsage(cpu).system) / 1e6).toFixed(1)],
    ['settings', 'the node defaults: check 30 s, wait 60 s, startAttempts 2, retry 600 s, guard 300 s (solar: onDelay 60 s, offDelay 120 s; dashboard: msg.energyLimit 15 kWh)'],
  ];
  for (const c of all) {
    const starts = c.sends.filter((s) => s.action === 'START').length;
    const perDay = Array.from({ length: args.days }, (_, i) => c.startsPerDay[i] ?? 0);
    const requests = c.sim.counters.progressQueries + c.sim.counters.startArrivals + c.sim.counters.stopArrivals + c.sim.counters.tokenRequests;
    rows.push([`${c.name}: STARTs per day (mean / max)`, `${(starts / args.days).toFixed(2)} / ${Math.max(...perDay)}`]);
    rows.push([`${c.name}: STOPs`, String(c.sends.filter((s) => s.action === 'STOP').length)]);
    rows.push([`${c.name}: requests per hour (progress, commands, tokens; client retries included)`, (requests / hours).toFixed(1)]);
    rows.push([`${c.name}: most STARTs in one retry interval`, String(maxStartsPerRetry(c))]);
    rows.push([`${c.name}: STARTs at the service while the token had a session`, String(c.sim.counters.duplicateStarts)]);
  }
  rows.push(['outage episodes (20 min of 503)', String(episodes.outages)]);
  rows.push(['Catch errors in outages (per episode)', `${errorsIn.outage} (${(errorsIn.outage / Math.max(1, episodes.outages)).toFixed(2)})`]);
  rows.push(['busy episodes (another card until 02:30)', String(episodes.busy)]);
  rows.push(['Catch errors while busy (per episode)', `${errorsIn.busy} (${(errorsIn.busy / Math.max(1, episodes.busy)).toFixed(2)})`]);
  rows.push(['other Catch errors', String(errorsIn.other)]);
  rows.push(['commands no wish or retry asked for', String(unasked.length)]);
  const ok = unasked.length === 0 && all.every((c) => maxStartsPerRetry(c) <= c.settings.startAttempts * 2);
  const report = ['# Soak run: charging-control for a month (compressed time)', '', '| figure | value |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`), '', ok ? 'PASSED' : 'FAILED', ''];
  if (unasked.length) report.push('Unasked commands:', '', ...unasked.slice(0, 20).map((u) => `- ${u.connector} ${u.action} at ${(u.at / H).toFixed(2)} h: ${u.why}`), '');
  const other = all.flatMap((c) => c.errors.map((e) => `${c.name}: ${e}`));
  if (other.length) report.push('Errors (first 10):', '', ...other.slice(0, 10).map((e) => `- ${e}`), '');
  console.log(report.join('\n'));
  if (args.out) fs.writeFileSync(args.out, report.join('\n'));
  for (const c of all) {
    await c.client.close();
    await c.sim.stop();
  }
  outageUntil = {};
  busyUntil = {};
  return ok;
}
