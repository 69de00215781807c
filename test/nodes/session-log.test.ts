import assert from 'node:assert/strict';
import { clientFor, load, runtimeSuite, send, Sink, until } from '../harness';

/** A session's record for the books (issue 17.5): msg.session on "ended", through the runtime, against the simulator. */
describe('ended: msg.session carries the session totals (runtime + simulator)', () => {
  // The session stays visible, meter frozen, for 600 ms after STOP: the watcher sees its final reading.
  const rt = runtimeSuite({ startDelayMs: 100, stopDelayMs: 600, powerW: 60_000 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const CMD = { locationId: 'LOC-B', evseId: '4', token: 'RFID-BOOKS' };

  it('energyKWh, durationSec, startedAt, endedAt, transactionId, cdrId, token, locationId and evseId, as last seen', async () => {
    // Every poll is sent, so the message before "ended" holds the last record the watcher saw.
    await load(rt.sim, [
      { id: 'w', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, emitEveryPoll: true, watchTokens: CMD.token, wires: [['out']] },
      { id: 'out', type: 'helper' },
    ]);
    const out = Sink.of('out');
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', ...CMD });
      await until(() => out.messages.some((m) => m.event === 'updated'), 'the meter moving', 5000);
      const sim = rt.sim.session(CMD.token);
      assert.ok(sim);
      await client.sendCommand({ action: 'STOP', ...CMD, transactionId: sim.transactionId });
      const stopped = rt.sim.session(CMD.token);
      assert.ok(stopped?.stoppedAt);
      await until(() => out.messages.some((m) => m.event === 'ended'), 'ended', 5000);
      const seenAt = Date.now();
      const i = out.messages.findIndex((m) => m.event === 'ended');
      const ended = out.messages[i] as Record<string, unknown>;
      const last = out.messages[i - 1] as Record<string, unknown>;
      const record = last.payload as { timestamp: string; createdAt: string; transactionData: { meterStart: number; meterEnd: number } };
      const session = ended.session as Record<string, unknown>;

      // Energy from the meter the simulator produced: its frozen reading at the STOP.
      const wh = Math.floor(((stopped.stoppedAt - stopped.startedAt) / 3_600_000) * stopped.powerW);
      assert.equal(record.transactionData.meterEnd, stopped.meterStart + wh, 'the last poll saw the final reading');
      assert.ok(wh > 0);
      assert.equal(session.energyKWh, Math.round(wh) / 1000);
      assert.equal(session.durationSec, Math.round((Date.parse(`${record.timestamp}Z`) - stopped.createdAt) / 1000));
      assert.equal(session.startedAt, new Date(stopped.createdAt).toISOString());
      assert.equal(session.transactionId, stopped.transactionId);
      assert.equal(session.cdrId, stopped.cdrId);
      assert.equal(session.token, CMD.token);
      assert.equal(session.locationId, CMD.locationId);
      assert.equal(session.evseId, CMD.evseId);
      // endedAt: when the end was seen, after the session was gone from the service, by the wall clock.
      assert.equal(typeof session.endedAt, 'string');
      const endedAt = Date.parse(session.endedAt as string);
      assert.equal(new Date(endedAt).toISOString(), session.endedAt);
      assert.ok(endedAt >= stopped.stoppedAt + 600 && endedAt <= seenAt, `endedAt ${String(session.endedAt)}`);
      assert.equal(ended.payload, null);
      assert.equal(ended.topic, CMD.token);
    } finally {
      await client.close();
    }
  });

  it('charging-stop "Make sure it ends": the ended message carries the same totals, endedAt when the end was seen', async () => {
    await load(rt.sim, [
      { id: 'stop', type: 'charging-stop', service: 'svc', wait: true, ensure: true, waitTimeout: 5, wires: [['out']] },
      { id: 'out', type: 'helper' },
    ]);
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', ...CMD });
      await until(() => (rt.sim.session(CMD.token)?.startedAt ?? Infinity) + 300 <= Date.now(), 'charging');
    } finally {
      await client.close();
    }
    const sim = rt.sim.session(CMD.token);
    assert.ok(sim);
    send('stop', { payload: { ...CMD, transactionId: sim.transactionId } });
    const msg = await Sink.of('out').next(10_000);
    const seenAt = Date.now();
    assert.equal(msg.outcome, 'ended');
    const session = msg.session as Record<string, unknown>;
    assert.deepEqual(
      [session.transactionId, session.cdrId, session.token, session.locationId, session.evseId, session.startedAt],
      [sim.transactionId, sim.cdrId, CMD.token, CMD.locationId, CMD.evseId, new Date(sim.createdAt).toISOString()],
    );
    assert.equal(typeof session.energyKWh, 'number');
    assert.equal(typeof session.durationSec, 'number');
    const endedAt = Date.parse(String(session.endedAt));
    // The simulator's own record of the session (the same object, kept after it is gone): stopped, then gone 600 ms later.
    assert.ok(sim.stoppedAt !== null && endedAt >= sim.stoppedAt + 600 && endedAt <= seenAt, `endedAt ${String(session.endedAt)}`);
  });
});
