/**
 * The simulator's cars, the driver at the station and the peak of concurrent
 * sessions, seen over HTTP with the real client: the meter a progress record
 * shows follows the car's power (taper, 0 W when full), sessions started and
 * ended at the station are no commands, and the peak is exact.
 */
import assert from 'node:assert/strict';
import { clientFor, startSimulator } from '../harness';
import { ChargingServiceSimulator, energyWh, fullAfterMs, powerAt, type Car } from '../../simulator/simulator';

const H = 3_600_000;
const A = { locationId: 'SIM-LOC', evseId: '1', token: 'SIM-1' };
const B = { locationId: 'SIM-LOC', evseId: '2', token: 'SIM-2' };
const C = { locationId: 'SIM-LOC', evseId: '3', token: 'SIM-3' };

describe('simulator: cars, the station and the peak of sessions', () => {
  let now = 1_000_000;
  let sim: ChargingServiceSimulator;
  beforeEach(async () => {
    now = 1_000_000;
    sim = await startSimulator({ now: () => now, startDelayMs: 1000, stopDelayMs: 2000 });
  });
  afterEach(() => sim.stop());

  async function meterWh(token: string): Promise<number> {
    const client = clientFor(sim);
    try {
      const { record } = await client.getProgress(token);
      const tx = (record as { transactionData?: { meterStart: number; meterEnd: number } }).transactionData;
      return tx ? tx.meterEnd - tx.meterStart : NaN;
    } finally {
      await client.close();
    }
  }

  it('a car tapers to 0 W and is full at needWh; energy is the integral of its power', () => {
    const car: Car = { powerW: 11_000, needWh: 20_000, taperWh: 4_000 };
    // Full power for 16 kWh (16/11 h), then 4 kWh over 2·4/11 h.
    assert.equal(powerAt(car, 0), 11_000);
    assert.equal(powerAt(car, (16 / 11) * H - 1), 11_000);
    const taperMs = (8 / 11) * H;
    assert.ok(Math.abs(powerAt(car, (16 / 11) * H + taperMs / 2) - 5_500) < 1e-6, 'half way down the taper: half the power');
    assert.ok(Math.abs(fullAfterMs(car) - (24 / 11) * H) < 1e-6);
    assert.equal(powerAt(car, fullAfterMs(car)), 0);
    assert.equal(powerAt(car, fullAfterMs(car) + H), 0, 'full: 0 W for ever');
    assert.ok(Math.abs(energyWh(car, fullAfterMs(car)) - 20_000) < 1e-6);
    assert.equal(energyWh(car, fullAfterMs(car) + 10 * H), energyWh(car, fullAfterMs(car)));
    // The integral, numerically.
    let sum = 0;
    const step = 1000;
    for (let t = 0; t < fullAfterMs(car); t += step) sum += (powerAt(car, t + step / 2) * step) / H;
    assert.ok(Math.abs(sum - 20_000) < 1, `numerical integral ${sum}`);
    assert.equal(energyWh({ powerW: 7_000, needWh: Infinity, taperWh: 0 }, H), 7_000, 'the default car: constant power');
    const noTaper = { powerW: 10_000, needWh: 5_000, taperWh: 0 };
    assert.equal(energyWh(noTaper, 2 * H), 5_000, 'no taper: full power until full, then nothing');
    assert.equal(powerAt(noTaper, 0.5 * H - 1), 10_000);
    assert.equal(powerAt(noTaper, 0.5 * H), 0);
  });

  it('the progress record meters the plugged-in car: full power, taper, then a frozen meter (0 W)', async () => {
    sim.plugIn(A, { powerW: 3_600, needWh: 3_000, taperWh: 1_000 }); // 1 Wh a second at full power
    const client = clientFor(sim);
    await client.sendCommand({ action: 'START', ...A });
    await client.close();
    now += 1000 + 1000 * 1000; // started, then 1000 s at 3.6 kW: 1 kWh
    assert.equal(await meterWh(A.token), 1000);
    assert.equal(sim.powerNow(A.token), 3_600);
    now += 1000 * 1000 + 1000 * 1000; // 2 kWh reached at 2000 s; taper of 2000 s from there, half way
    assert.equal(await meterWh(A.token), 2750);
    assert.ok(Math.abs(sim.powerNow(A.token) - 1_800) < 1e-6);
    now += 1000 * 1000; // full
    assert.equal(await meterWh(A.token), 3000);
    assert.equal(sim.powerNow(A.token), 0);
    now += 3 * H;
    assert.equal(await meterWh(A.token), 3000, 'a full car draws nothing');
    assert.ok(sim.session(A.token), 'and keeps its session');
  });

  it('sessions started and ended at the station are no commands; a connector whose car left starts nothing', async () => {
    const s = sim.stationStart(A, { powerW: 7_200 });
    assert.equal(s.atStation, true);
    assert.throws(() => sim.stationStart(A), /already has a session/);
    assert.throws(() => sim.stationStart({ ...A, token: 'OTHER' }), /busy/);
    now += 1000 + 500_000;
    assert.equal(await meterWh(A.token), 1000);
    assert.equal(sim.stationStop(A.token), true);
    assert.equal(sim.stationStop(A.token), false, 'already ending');
    now += 2000;
    assert.equal(sim.session(A.token), undefined);
    assert.deepEqual([sim.counters.starts, sim.counters.stops, sim.counters.startArrivals, sim.counters.stopArrivals], [0, 0, 0, 0]);
    // The driver leaves: the session ends at the station; a START there is accepted and brings nothing.
    const client = clientFor(sim);
    try {
      await client.sendCommand({ action: 'START', ...B });
      assert.ok(sim.session(B.token));
      sim.unplug(B);
      assert.notEqual(sim.session(B.token)?.stoppedAt, null);
      now += 2000;
      assert.equal(sim.session(B.token), undefined);
      await client.sendCommand({ action: 'START', ...B });
      assert.equal(sim.session(B.token), undefined, 'no car: no session');
      sim.plugIn(B);
      await client.sendCommand({ action: 'START', ...B });
      assert.ok(sim.session(B.token), 'a car again: a session');
      assert.equal(sim.counters.startArrivals, 3);
    } finally {
      await client.close();
    }
  });

  it('the peak of concurrent sessions is exact: lives from creation until progress no longer shows them, an end at the moment of a start does not overlap', () => {
    sim.stationStart(A);
    now += 10;
    sim.stationStart(B);
    now += 10;
    sim.stationStop(A.token); // A is gone at now + 2000
    now += 1999;
    sim.stationStart(C); // A still shows: three at once for 1 ms
    assert.equal(sim.peakSessions(), 3);
    assert.equal(sim.sessionsAt(now), 3);
    assert.equal(sim.sessionsAt(now + 1), 2);
    sim.stationStop(B.token);
    sim.stationStop(C.token);
    now += 2000;
    sim.stationStart({ ...A, token: 'SIM-4' }); // exactly when B and C are gone
    assert.equal(sim.peakSessions(), 3);
    assert.equal(sim.peakSessions((s) => s.evseId !== '3'), 2, 'a filter: the sessions of some connectors');
    assert.equal(sim.sessionsAt(now), 1, 'B and C gone at this very moment');
    assert.equal(sim.sessionLog().length, 4);
    sim.reset();
    assert.equal(sim.peakSessions(), 0);
  });
});
