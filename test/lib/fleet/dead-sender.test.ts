/**
 * A replica that claimed a command and died before sending it (kill -9; found
 * by the nemesis over processes, test/fleet-process-chaos.ts): its claim lives
 * sendMs + windowMs (62 s by default), so the same STOP injected again after
 * the duplicates said OUTCOME_UNKNOWN (what the error tells the user to check,
 * then do) is a "duplicate" of a sender that is gone, and is not sent either:
 * a STOP that does not stop for a minute.
 */
import assert from 'node:assert/strict';
import { startCommand, stopCommand } from '../../../nodes/lib/session/commands';
import { fleetSuite, runCommand, claimCommand } from './fleet-fixture';

describe('fleet: a command claimed by a replica that died before sending it', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('the same STOP again, past the window, once the claimer has left the fleet: sent by a live replica', async () => {
    // A claim without outcome is taken over only once it is old enough for a live claimer to be back among the members.
    const dead = suite.replica();
    const live = suite.replica();
    await dead.connection.open();
    await live.connection.open();
    const cmd = stopCommand({ locationId: 'L', evseId: '1', token: 'DEAD-1', transactionId: 'TX-DEAD-1' });
    const claimed = await claimCommand(dead, cmd, 5_000);
    assert.equal(claimed.role, 'sender');
    // It dies holding the claim: no publish; its membership lapses (close() is the quick way out of the fleet).
    await dead.close();
    await new Promise((r) => setTimeout(r, Math.max(dead.claims.windowMs, dead.claims.takeOverAfterMs) + 300));
    let sent = 0;
    const run = await runCommand(live, cmd, async () => ++sent, 5_000);
    assert.equal(run.role, 'sent', `a STOP asked for again is sent, got ${JSON.stringify(run)}`);
    assert.equal(sent, 1);
  });

  it('right after Redis lost its data, a live claimer not yet back among the members keeps its STOP: sent once', async () => {
    const a = suite.replica();
    const b = suite.replica();
    await a.connection.open();
    await b.connection.open();
    await suite.redis.admin().flushall(); // the members are gone until the next heartbeats
    const cmd = stopCommand({ locationId: 'L', evseId: '2', token: 'LOSS-STOP', transactionId: 'TX-LOSS-STOP' });
    const claimed = await claimCommand(a, cmd, 5_000);
    assert.equal(claimed.role, 'sender');
    let sent = 0;
    const other = runCommand(b, cmd, async () => ++sent, 2_000);
    await new Promise((r) => setTimeout(r, 300));
    if (claimed.role === 'sender') await claimed.publish({ ok: true, result: 1 });
    const run = await other;
    assert.equal(run.role, 'duplicate', `the second replica waits for the claimer's outcome, got ${JSON.stringify(run)}`);
    assert.equal(sent, 0);
  });

  it('the duplicates of a STOP already waiting when its claimer dies: one of them takes it over and sends it, once; a START\'s duplicates send nothing (OUTCOME_UNKNOWN)', async () => {
    const dead = suite.replica();
    const live = [suite.replica(), suite.replica()];
    await Promise.all([dead, ...live].map((f) => f.connection.open()));
    const stop = stopCommand({ locationId: 'L', evseId: '3', token: 'DEAD-WAIT', transactionId: 'TX-DEAD-WAIT' });
    const start = startCommand({ locationId: 'L', evseId: '4', token: 'DEAD-WAIT-S' });
    assert.equal((await claimCommand(dead, stop, 5_000)).role, 'sender');
    assert.equal((await claimCommand(dead, start, 5_000)).role, 'sender');
    let stops = 0;
    let starts = 0;
    const waiting = live.map((f) => runCommand(f, stop, async () => ++stops, 5_000));
    const waitingStart = live.map((f) => runCommand(f, start, async () => ++starts, 2_000));
    await new Promise((r) => setTimeout(r, 100));
    await dead.close(); // dies holding both claims, without an outcome
    const runs = await Promise.all(waiting);
    assert.equal(stops, 1, `the STOP sent once by the survivors: ${JSON.stringify(runs)}`);
    assert.deepEqual(runs.map((r) => r.role).sort(), ['duplicate', 'sent'], 'one sent it, the other passed its outcome on');
    const startRuns = await Promise.all(waitingStart);
    assert.equal(starts, 0, 'a START is never taken over: its claimer may only be paused');
    assert.deepEqual(startRuns.map((r) => r.role), ['unknown', 'unknown']);
  });

  it('a claimer that looks gone for a moment (its membership lapsed: a write pause, a late heartbeat) is not dead: the STOP is sent once', async () => {
    const claimer = suite.replica();
    const waiting = suite.replica();
    await Promise.all([claimer, waiting].map((f) => f.connection.open()));
    const stop = stopCommand({ locationId: 'L', evseId: '5', token: 'PAUSED', transactionId: 'TX-PAUSED' });
    const claimed = await claimCommand(claimer, stop, 5_000);
    assert.equal(claimed.role, 'sender');
    let sent = 0;
    const other = runCommand(waiting, stop, async () => ++sent, 10_000);
    // The claim old enough to be taken over; then its claimer missing from the members for 600 ms (as right after a
    // write pause, until its next heartbeat), far shorter than the takeover age.
    await new Promise((r) => setTimeout(r, claimer.claims.takeOverAfterMs + 200));
    const admin = suite.redis.admin();
    for (let end = performance.now() + 600; performance.now() < end; ) {
      await admin.zrem(claimer.keys.replicas, claimer.replicaId);
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 300));
    if (claimed.role === 'sender') await claimed.publish({ ok: true, result: 1 });
    const run = await other;
    assert.equal(run.role, 'duplicate', `the claimer's STOP is not taken over: ${JSON.stringify(run)}`);
    assert.equal(sent, 0);
  });
});
