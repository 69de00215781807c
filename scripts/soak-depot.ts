/**
 * The depot soak (`npm run soak -- --depot [--days 30]`): eight connectors
 * behind one depot of limit 3 (turns of 30 min, the other depot settings and
 * charging-control's at their defaults: check 30 s, wait 60 s, 2 STARTs,
 * retry 600 s, guard 300 s), kept by one control book on a fake clock that
 * the simulator follows, every request real HTTP. Each day, each connector
 * may get a car: most nights a van that comes back between 16 and 20 h and
 * leaves between 5 and 8 h the next morning, on other days a visitor between
 * 8 and 14 h for 2–6 hours. A car arrives (the flow wants it on), needs
 * 5–60 kWh at 7.4, 11 or 22 kW (tapering over its last tenth, 0 W when
 * full) and leaves (the flow wants it off, then the car is unplugged).
 *
 * Reports the peak of sessions at once (exact, from the simulator: must not
 * pass the limit), the waiting time per car from its on to its first START
 * (median, worst), the cars full when they left, turns per day, STARTs per
 * connector per day, and the
 * commands that no wish, turn, shed or full car asked for (must be 0). Exit 1
 * when either fails.
 */
import fs from 'node:fs';
import { ServiceClient } from '../nodes/lib/client/service-client';
import { ControlBook } from '../nodes/lib/control/book';
import type { ControlDeps } from '../nodes/lib/control/controller';
import type { ControlSettings } from '../nodes/lib/control/memory';
import { MemoryControlStore } from '../nodes/lib/control/store';
import { targetKey } from '../nodes/lib/control/view';
import { LocalGrantPool } from '../nodes/lib/coordination/grant-pool';
import type { GrantStore } from '../nodes/lib/coordination/grants';
import { DepotLink, type DepotHook } from '../nodes/lib/depot/link';
import { depotSettings } from '../nodes/lib/depot/settings';
import { ChargingServiceSimulator, energyWh } from '../simulator/simulator';
import { FakeClock } from '../test/lib/control/fake-clock';
import { rng } from './soak-faults';

export interface DepotSoakArgs {
  days: number;
  seed: number;
  out: string | null;
}

const CONTROL: ControlSettings = {
  guardMs: 300_000, checkMs: 30_000, confirmMs: 2_000, waitMs: 60_000, startAttempts: 2, stopAttempts: 3, enforce: false,
  retryMs: 600_000, onDelayMs: 0, offDelayMs: 0, energyLimitKWh: null,
};
const CONNECTORS = 8;
const LIMIT = 3;
const H = 3_600_000;
const DAY = 24 * H;
const LOC = 'SOAK-DEPOT';

const nullStore: GrantStore = { load: () => Promise.resolve(null), save: () => Promise.resolve(), saveLimits: () => Promise.resolve() };

interface Connector {
  target: { locationId: string; evseId: string; token: string };
  /** the wish in force */
  on: boolean;
  /** when the current car's on came, until its first START (null: started, or no car) */
  waitingSince: number | null;
  /** the depot told this connector's session to stop (a turn, a shed, a full car) and its STOP is still due */
  toldToStop: string | null;
}

export async function soakDepot(args: DepotSoakArgs): Promise<boolean> {
  const random = rng(args.seed);
  const clock = new FakeClock();
  const t0 = clock.now();
  const sim = await new ChargingServiceSimulator({ startDelayMs: 2_000, stopDelayMs: 2_000, keepRequests: 0, tokenLifetimeSec: 90 * 86_400, now: () => clock.wall() }).start();
  const client = new ServiceClient({ baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: sim.options.clientId, clientSecret: sim.options.clientSecret, timeoutMs: 2_000, retry: { baseDelayMs: 1, maxDelayMs: 2 } });
  const { settings } = depotSettings({ limit: LIMIT, turn: 1800 });
  const pool = new LocalGrantPool({ store: nullStore, now: () => clock.wall(), recountMs: 0 });
  await pool.configure({ limit: settings.limit, budgetKW: settings.budgetKW, agingMs: settings.agingMs });
  let book: ControlBook | null = null;
  const link = new DepotLink({ pool, settings, priority: 0, checkMs: CONTROL.checkMs, waitMs: CONTROL.waitMs, clock, warn: (t) => errors.push(t), log: () => undefined, poke: (key) => void book?.get(key)?.check('command') });
  const connectors = Array.from({ length: CONNECTORS }, (_, i): Connector => ({ target: { locationId: LOC, evseId: String(i + 1), token: `SOAK-CAR-${i + 1}` }, on: false, waitingSince: null, toldToStop: null }));
  const byKey = new Map(connectors.map((c) => [targetKey(c.target), c]));
  const yields: Record<string, number> = { turn: 0, shed: 0, preempt: 0, idle: 0 };
  // The depot's word, seen as the controller hears it: a yield is a STOP the depot asked for.
  const depot: DepotHook = {
    hold: async (key, facts) => {
      const word = await link.hold(key, facts);
      const c = byKey.get(key);
      if (word.yield && c && !c.toldToStop && c.on) {
        c.toldToStop = word.yield.kind;
        yields[word.yield.kind]++;
      }
      return word;
    },
    ask: (key, p) => link.ask(key, p),
    release: (key) => link.release(key),
    unread: (key) => link.unread(key),
  };
  const errors: string[] = [];
  const sends: Array<{ action: string; token: string; at: number; asked: boolean; why: string }> = [];
  const waits: number[] = [];
  const startsPerDay: number[][] = connectors.map(() => []);
  const deps: ControlDeps = {
    poll: (t, priority) => client.getProgress(t.token, { priority }).then((r) => r.record),
    send: (cmd) => {
      const c = byKey.get(targetKey(cmd)) as Connector;
      const at = clock.now() - t0;
      if (cmd.action === 'START') {
        const day = Math.floor(at / DAY);
        const i = connectors.indexOf(c);
        startsPerDay[i][day] = (startsPerDay[i][day] ?? 0) + 1;
        if (c.waitingSince !== null) waits.push(clock.now() - c.waitingSince);
        c.waitingSince = null;
        sends.push({ action: 'START', token: c.target.token, at, asked: c.on, why: `wish ${String(c.on)}` });
      } else {
        sends.push({ action: 'STOP', token: c.target.token, at, asked: !c.on || c.toldToStop !== null, why: `wish ${String(c.on)}, depot ${String(c.toldToStop)}` });
        c.toldToStop = null;
      }
      return client.sendCommand(cmd);
    },
    store: new MemoryControlStore(),
    clock,
    track: clock.track,
    onState: () => undefined,
    onError: (_t, e) => errors.push(e.message),
    depot,
  };
  book = new ControlBook(CONTROL, deps);

  const events: Array<{ at: number; run(): void | Promise<void> }> = [];
  const at = (ms: number, run: () => void | Promise<void>) => events.push({ at: t0 + ms, run });
  let cars = 0;
  let full = 0;
  for (const c of connectors) {
    let free = 0; // the connector is free from here (the last car left)
    for (let d = 0; d < args.days; d++) {
      const van = random() < 0.7;
      if (!van && random() < 0.5) continue; // no car today
      const arrive = Math.max(free + 10 * 60_000, d * DAY + (van ? 16 + random() * 4 : 8 + random() * 6) * H);
      const leave = van ? (d + 1) * DAY + (5 + random() * 3) * H : arrive + (2 + random() * 4) * H;
      free = leave;
      const powerW = [7_400, 11_000, 22_000][Math.floor(random() * 3)];
      const needWh = (5 + random() * 55) * 1000;
      cars++;
      at(arrive, async () => {
        sim.plugIn(c.target, { powerW, needWh, taperWh: needWh / 10 });
        c.waitingSince = clock.now();
        await wish(c, true);
      });
      at(leave, async () => {
        // Full when it leaves: what its sessions drew since it came, by the simulator's own meter.
        const drawn = sim.sessionLog().filter((s) => s.token === c.target.token && s.createdAt >= clock.wall() - (leave - arrive)).reduce((wh, s) => wh + energyWh(s.car, Math.min(s.stoppedAt ?? clock.wall(), clock.wall()) - s.startedAt), 0);
        if (drawn >= needWh - 1) full++;
        await wish(c, false);
        c.waitingSince = null;
        sim.unplug(c.target);
      });
    }
  }
  events.sort((a, b) => a.at - b.at);

  async function wish(c: Connector, on: boolean): Promise<void> {
    c.on = on;
    if (!on) c.toldToStop = null;
    const err = await book!.want(c.target, on);
    if (err) errors.push(err.message);
  }

  const started = Date.now();
  const cpu = process.cpuUsage();
  for (const e of events) {
    if (e.at > clock.now()) await clock.advance(e.at - clock.now());
    await e.run();
  }
  await clock.advance(H);
  book.close();
  link.close();

  const peak = sim.peakSessions((s) => s.locationId === LOC);
  const unasked = sends.filter((s) => !s.asked);
  const sorted = [...waits].sort((a, b) => a - b);
  const minutes = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 60_000).toFixed(1)} min`);
  const starts = sends.filter((s) => s.action === 'START').length;
  const maxPerDay = Math.max(0, ...startsPerDay.flat().filter((x) => x !== undefined));
  const rows: Array<[string, string]> = [
    ['date', new Date().toISOString()],
    ['simulated days', String(args.days)],
    ['wall-clock seconds', ((Date.now() - started) / 1000).toFixed(0)],
    ['cpu seconds', ((process.cpuUsage(cpu).user + process.cpuUsage(cpu).system) / 1e6).toFixed(1)],
    ['settings', `${CONNECTORS} connectors, depot limit ${LIMIT}, turn 1800 s, the other depot and control settings at their defaults (minRun 600 s, aging 3600 s, idle 0.1 kWh in 1800 s, overFor 60 s; check 30 s, wait 60 s, 2 STARTs, retry 600 s, guard 300 s)`],
    ['cars (full when they left)', `${cars} (${full})`],
    ['peak of sessions at once (exact; limit 3)', String(peak)],
    ['waiting time per car, on to first START: median / worst', `${minutes(sorted[Math.floor(sorted.length / 2)])} / ${minutes(sorted.at(-1))}`],
    ['turns per day (per connector)', `${(yields.turn / args.days).toFixed(2)} (${(yields.turn / args.days / CONNECTORS).toFixed(2)})`],
    ['full cars let go (idle), sheds, preemptions', `${yields.idle}, ${yields.shed}, ${yields.preempt}`],
    ['STARTs per connector per day: mean / most in a day', `${(starts / CONNECTORS / args.days).toFixed(2)} / ${maxPerDay}`],
    ['STOPs', String(sends.filter((s) => s.action === 'STOP').length)],
    ['STARTs at the service while the token had a session', String(sim.counters.duplicateStarts)],
    ['errors (Catch and warnings)', String(errors.length)],
    ['commands no wish, turn, shed or full car asked for', String(unasked.length)],
  ];
  const ok = unasked.length === 0 && peak <= LIMIT && sim.counters.duplicateStarts === 0;
  const report = ['# Soak run: a depot for a month (compressed time)', '', '| figure | value |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`), '', ok ? 'PASSED' : 'FAILED', ''];
  if (unasked.length) report.push('Unasked commands:', '', ...unasked.slice(0, 20).map((u) => `- ${u.token} ${u.action} at ${(u.at / H).toFixed(2)} h: ${u.why}`), '');
  if (errors.length) report.push('Errors (first 10):', '', ...errors.slice(0, 10).map((e) => `- ${e}`), '');
  console.log(report.join('\n'));
  if (args.out) fs.writeFileSync(args.out, report.join('\n'));
  await client.close();
  await sim.stop();
  return ok;
}
