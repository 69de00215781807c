/**
 * charging-ledger in a real Node-RED runtime after a watching progress node,
 * against the simulator whose clock places each session in time (a month's
 * first minute in Europe/Berlin, both changes of daylight saving time, a
 * time-of-use window at 22:00).
 */
import assert from 'node:assert/strict';
import type { ServiceClient } from '../../nodes/lib/client/service-client';
import { SimClock } from '../../simulator/clock';
import { clientFor, delay, load, loggedText, runtimeSuite, send, Sink, statusCalls, until } from '../harness';

const clock = new SimClock();
const TARIFFS = [{ id: 'home', currency: 'EUR', pricePerKWh: 0.3, windows: [{ days: 'mon-sun', from: '22:00', to: '06:00', pricePerKWh: 0.2 }] }];
const TOKENS = [{ token: 'LED-1', label: 'Anna', vehicle: 'B-XY 123', tariff: 'home' }];

export const LEDGER_FLOW = (extra: Record<string, unknown> = {}) => [
  { id: 'watcher', type: 'charging-progress', service: 'svc', mode: 'watch', watchTokens: 'LED-1', interval: 0.2, wires: [['ledger', 'events']] },
  { id: 'ledger', type: 'charging-ledger', service: 'svc', timeZone: 'Europe/Berlin', tokens: JSON.stringify(TOKENS), tariffs: JSON.stringify(TARIFFS), wires: [['records'], ['answers']], ...extra },
  { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] },
  ...['records', 'answers', 'events', 'caught'].map((id) => ({ id, type: 'helper' })),
];

type Rec = Record<string, unknown> & { recordId: string; energyWh: number; cost: number; segments: Array<{ window: string; energyWh: number; pricePerKWh: number }> };

describe('charging-ledger: one record per session (runtime + simulator clock)', function () {
  this.timeout(30_000);
  const rt = runtimeSuite({ now: clock.now, startDelayMs: 0, stopDelayMs: 0, tokenLifetimeSec: 10 * 365 * 86400 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  let client: ServiceClient;
  beforeEach(() => (client = clientFor(rt.sim)));
  afterEach(() => client.close());

  const records = () => Sink.of('records').messages;
  const events = () => Sink.of('events').messages;

  /** A session placed at `startIso` on the service's clock, charging for `ms`, stopped; its record and its ended event. */
  async function session(startIso: string, ms: number): Promise<{ rec: Rec; ended: Record<string, unknown>; meterStart: number }> {
    clock.set(startIso);
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'LED-1' });
    const s = rt.sim.session('LED-1')!;
    await until(() => events().some((m) => m.event === 'started' && (m.session as { transactionId: string }).transactionId === s.transactionId), 'started').catch((e: Error) => assert.fail(`${e.message}: ${JSON.stringify(events())} ${JSON.stringify(Sink.of('caught').messages)} ${loggedText().slice(0, 2000)}`));
    clock.advance(ms);
    const wh = Math.floor((ms / 3_600_000) * s.powerW);
    await until(() => events().some((m) => m.event === 'updated' && (m.session as { meterEnd: number }).meterEnd >= s.meterStart + wh), 'the meter after the jump');
    await client.sendCommand({ action: 'STOP', locationId: 'L', evseId: '1', token: 'LED-1', transactionId: s.transactionId });
    await until(() => records().some((m) => m.recordId === s.transactionId), 'the record', 8000);
    const rec = records().find((m) => m.recordId === s.transactionId)!.payload as Rec;
    const ended = events().find((m) => m.event === 'ended' && (m.session as { transactionId: string }).transactionId === s.transactionId)!;
    return { rec, ended, meterStart: s.meterStart };
  }

  it('a session at 00:01 local on the 1st: one record in that month, with the simulator\'s meters and a price; repeats and the stop node\'s output add nothing', async () => {
    await load(rt.sim, LEDGER_FLOW());
    // 2026-02-01 00:01 in Berlin is 2026-01-31 23:01 UTC.
    const { rec, ended, meterStart } = await session('2026-01-31T23:01:00.000Z', 30 * 60_000);
    const last = ended.session as { meterEnd: number; cdrId: string };
    assert.equal(rec.month, '2026-02');
    assert.equal(rec.startLocal, '2026-02-01T00:01:00+01:00');
    assert.equal(String(rec.startUtc).slice(0, 19), '2026-01-31T23:01:00');
    assert.equal(rec.meterStartWh, meterStart);
    assert.equal(rec.meterEndWh, last.meterEnd);
    assert.equal(rec.energyWh, last.meterEnd - meterStart);
    assert.ok(Math.abs(rec.energyWh - 5500) < 60, `about 5.5 kWh in 30 min at 11 kW: ${rec.energyWh}`);
    assert.equal(rec.cost, Math.round(rec.energyWh * 0.2) / 1000, 'night window price, rounded once');
    assert.equal(rec.currency, 'EUR');
    assert.equal(rec.revision, 1);
    assert.equal(rec.endObserved, true);
    assert.equal(rec.label, 'Anna');
    assert.equal(rec.cdrId, last.cdrId);
    // The same ended again, and the stop node's output for the same session: nothing new.
    send('ledger', { ...ended });
    send('ledger', { outcome: 'ended', stopAttempts: 1, payload: {}, session: ended.session });
    send('ledger', { topic: 'get', payload: { transactionId: rec.recordId } });
    await Sink.of('answers').nth(1);
    await delay(200);
    assert.equal(records().length, 1, 'one record');
    assert.deepEqual((Sink.of('answers').messages[0].payload as Rec).energyWh, rec.energyWh);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('both changes of daylight saving time: offsets in the local strings, durationSec from UTC', async () => {
    await load(rt.sim, LEDGER_FLOW());
    // Spring: 01:30 CET, an hour on is 03:30 CEST.
    const spring = (await session('2026-03-29T00:30:00.000Z', 60 * 60_000)).rec;
    assert.equal(spring.startLocal, '2026-03-29T01:30:00+01:00');
    assert.match(String(spring.endLocal), /^2026-03-29T03:30:0\d\+02:00$/);
    assert.ok(Number(spring.durationSec) >= 3600 && Number(spring.durationSec) < 3610, `spring: ${spring.durationSec}`);
    // Autumn: 02:30 CEST, an hour on is 02:30 CET again: not -3590 s, and the two readings are told apart by their offsets.
    const autumn = (await session('2026-10-25T00:30:00.000Z', 60 * 60_000)).rec;
    assert.equal(autumn.startLocal, '2026-10-25T02:30:00+02:00');
    assert.match(String(autumn.endLocal), /^2026-10-25T02:30:0\d\+01:00$/);
    assert.ok(Number(autumn.durationSec) >= 3600 && Number(autumn.durationSec) < 3610, `autumn: ${autumn.durationSec}`);
    assert.equal(autumn.month, '2026-10');
  });

  it('time of use: a session from 21:30 to 22:30 local is priced half at the day price, half at the night price', async () => {
    await load(rt.sim, LEDGER_FLOW());
    const { rec } = await session('2026-01-14T20:30:00.000Z', 60 * 60_000);
    const day = rec.segments.find((s) => s.window === 'base')!;
    const night = rec.segments.find((s) => s.window === '22:00-06:00')!;
    assert.equal(day.energyWh + night.energyWh, rec.energyWh, 'the segments add up to the energy');
    assert.ok(Math.abs(day.energyWh - night.energyWh) < rec.energyWh * 0.02, `about half each: ${day.energyWh} / ${night.energyWh}`);
    const exact = (day.energyWh * 0.3 + night.energyWh * 0.2) / 1000;
    assert.equal(rec.cost, Math.round(exact * 100) / 100);
  });

  it('the memory store: a yellow badge and one warning, and no record value in the log or the badge', async () => {
    await load(rt.sim, LEDGER_FLOW());
    const { rec } = await session('2026-05-10T08:00:00.000Z', 10 * 60_000);
    await until(() => statusCalls('ledger').some((s) => s.fill === 'yellow'), 'the yellow badge');
    const log = loggedText();
    assert.equal((log.match(/memory context store/g) ?? []).length, 1, 'warned once');
    const shown = JSON.stringify(statusCalls('ledger')) + log;
    for (const v of [rec.recordId, String(rec.cdrId), 'Anna', 'B-XY 123']) assert.ok(!shown.includes(v), `${v} must not be logged or shown`);
  });

  it('commands: report, export (CSV), a CDR correction, the same CDR again, a credit, an exported month amended; bad input to Catch with a code', async () => {
    await load(rt.sim, LEDGER_FLOW({ maskTokens: true }));
    const { rec } = await session('2026-06-30T21:59:00.000Z', 20 * 60_000);
    const answers = Sink.of('answers');
    const ask = async (topic: string, payload: unknown) => {
      const n = answers.messages.length;
      send('ledger', { topic, payload });
      return (await answers.nth(n + 1)) as Record<string, unknown> & { payload: Record<string, unknown> };
    };
    const report = (await ask('report', { month: '2026-06' })).payload;
    assert.equal(report.month, '2026-06');
    assert.equal(report.amended, false);
    assert.deepEqual(report.tokens, [{ token: '****ED-1', label: 'Anna', vehicle: 'B-XY 123', sessions: 1, energyWh: rec.energyWh, currency: 'EUR', cost: rec.cost, totals: { EUR: rec.cost } }]);
    assert.equal(report.total, rec.cost);
    const csv = await ask('export', { month: '2026-06' });
    assert.equal(csv.filename, 'charging-sessions-2026-06.csv');
    const lines = String(csv.payload).split('\r\n');
    assert.equal(lines.length, 3, 'header, one row, and the CRLF after it');
    assert.match(lines[1], new RegExp(`^${rec.recordId},1,\\*\\*\\*\\*ED-1,Anna,B-XY 123,`));
    // A CDR after the export: a new revision with the CDR's figures; the month is amended.
    const cdrId = String(rec.cdrId);
    const first = await ask('cdr', { cdrId, energyKWh: 3.5, totalCost: 1.234, currency: 'EUR' });
    assert.equal((first.payload as { changed: boolean }).changed, true);
    const corrected = records().find((m) => m.event === 'corrected')!;
    assert.equal(corrected.recordId, rec.recordId);
    assert.deepEqual([(corrected.payload as Rec).revision, (corrected.payload as Rec).energyWh, (corrected.payload as Rec).cost, (corrected.payload as Rec).source], [2, 3500, 1.23, 'cdr']);
    assert.equal((corrected.previous as Rec).revision, 1);
    const again = await ask('cdr', { cdrId, energyKWh: 3.5, totalCost: 1.234, currency: 'EUR' });
    assert.equal((again.payload as { changed: boolean }).changed, false, 'the same CDR changes nothing');
    const amended = (await ask('report', { month: '2026-06' })).payload;
    assert.equal(amended.amended, true);
    assert.deepEqual((amended.changes as Array<Record<string, unknown>>).map((c) => [c.revision, c.energyWh, c.previousEnergyWh]), [[2, 3500, rec.energyWh]]);
    assert.equal(amended.total, 1.23);
    const credit = await ask('cdr', { cdrId: 'CREDIT-1', credit: true, credit_reference_id: cdrId });
    assert.equal((credit.payload as { changed: boolean }).changed, true);
    const reverted = records().filter((m) => m.event === 'corrected')[1].payload as Rec;
    assert.deepEqual([reverted.revision, reverted.energyWh, reverted.cost, reverted.source], [3, rec.energyWh, rec.cost, 'meter']);
    assert.equal(records().length, 3, 'record, corrected, credited: nothing for the repeat');
    // Bad input: a code at Catch, nothing changed.
    send('ledger', { topic: 'cdr', payload: { cdrId: 'NOPE' } });
    send('ledger', { topic: 'report', payload: { month: '2026-13' } });
    send('ledger', { topic: 'what', payload: 1 });
    await until(() => Sink.of('caught').messages.length === 3, 'three errors');
    assert.deepEqual(Sink.of('caught').messages.map((m) => (m.error as { code?: string; message: string }).message.includes(cdrId)), [false, false, false]);
    assert.deepEqual(Sink.of('caught').messages.map((m) => (m.error as { code: string }).code), ['NO_RECORD', 'INVALID_INPUT', 'INVALID_INPUT']);
    assert.equal(records().length, 3);
    const after = (await ask('get', { transactionId: rec.recordId })).payload;
    assert.equal(after.revision, 3);
  });
});
