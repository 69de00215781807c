/**
 * The fleet when Redis misbehaves, each fault made on purpose (test/redis-nemesis.ts):
 * a claim or a commit whose reply is lost to a reconnect, a write pause (what
 * FAILOVER does), and a commit that lands while its token is being released.
 * Replicas are library instances in this process; commands go to the
 * simulator over HTTP, which counts what arrives.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { startCommand, stopCommand } from '../../../nodes/lib/session/commands';
import { SessionWatcher, type SavedState, type WatchEvent } from '../../../nodes/lib/session/watcher';
import { clientFor, startSimulator, until } from '../../harness';
import { pauseWrites, RedisNemesis } from '../../redis-nemesis';
import { fleetSuite, sleep, runCommand } from './fleet-fixture';

describe('fleet: lost replies and write pauses (real Redis through a nemesis, simulator)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  let nemesis: RedisNemesis;
  const clients: ServiceClient[] = [];
  const watchers: SessionWatcher[] = [];
  beforeEach(async () => {
    sim = await startSimulator();
    nemesis = await RedisNemesis.start(suite.redis.port);
  });
  afterEach(async () => {
    for (const w of watchers.splice(0)) w.close();
    for (const c of clients.splice(0)) await c.close();
    await nemesis.close();
    await sim.stop();
  });
  const client = () => {
    const c = clientFor(sim, { timeoutMs: 5_000 });
    clients.push(c);
    return c;
  };
  const viaNemesis = () => suite.replica({ url: nemesis.urlFor(suite.redis.url) });

  it('a claim whose reply is lost to a reconnect: read back, found ours, the START is sent once', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-LOST-CLAIM' });
    const a = viaNemesis();
    const b = suite.replica();
    await Promise.all([a.connection.open(), b.connection.open()]);
    const c = client();
    nemesis.withhold();
    const first = runCommand(a, cmd, () => c.sendCommand(cmd), 3_000);
    await sleep(150);
    nemesis.heal();
    const res = await first;
    assert.equal(res.role, 'sent', JSON.stringify(res));
    // Another replica producing the same command now gets the sender's outcome.
    const dup = await runCommand(b, cmd, () => c.sendCommand(cmd), 3_000);
    assert.equal(dup.role, 'duplicate');
    assert.equal(sim.counters.startArrivals, 1, 'one START at the service');
  });

  it('a claim that times out during CLIENT PAUSE WRITE: three replicas, one START', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '2', token: 'RFID-PAUSED' });
    const rs = [suite.replica(), suite.replica(), suite.replica()];
    await Promise.all(rs.map((f) => f.connection.open()));
    await pauseWrites(suite.redis.url, 1_000); // longer than the command timeout (400 ms)
    const results = await Promise.allSettled(rs.map((f) => runCommand(f, cmd, () => client().sendCommand(cmd), 5_000)));
    const roles = results.map((r) => (r.status === 'fulfilled' ? r.value.role : `error: ${(r.reason as Error).message}`));
    assert.equal(sim.counters.startArrivals, 1, `one START; ${roles.join(', ')}`);
    assert.deepEqual(roles.sort(), ['duplicate', 'duplicate', 'sent']);
  });

  it('a claim held up by a fault past the duplicate window still gets the outcome of the send it raced with', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '3', token: 'RFID-LATE' });
    const a = suite.replica({ claims: { windowMs: 200 } });
    const b = suite.replica({ url: nemesis.urlFor(suite.redis.url), claims: { windowMs: 200 } });
    await Promise.all([a.connection.open(), b.connection.open()]);
    nemesis.blackhole();
    const late = runCommand(b, cmd, () => client().sendCommand(cmd), 5_000);
    await sleep(50);
    assert.equal((await runCommand(a, cmd, () => client().sendCommand(cmd), 5_000)).role, 'sent');
    await sleep(600); // three windows
    nemesis.heal();
    const res = await late;
    assert.equal(res.role, 'duplicate', JSON.stringify(res));
    assert.equal(sim.counters.startArrivals, 1);
  });

  it('a claim sent before a write pause and run by Redis after it, past the duplicate window: still the outcome it raced with', async () => {
    // The claim's script carries how long ago its first try was; held by the pause, it ran later than that says.
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '4', token: 'RFID-HELD' });
    const a = suite.replica({ claims: { windowMs: 200 } });
    const b = suite.replica({ claims: { windowMs: 200 } });
    await Promise.all([a.connection.open(), b.connection.open()]);
    await sleep(300); // a heartbeat each: Redis's clock seen
    assert.equal((await runCommand(a, cmd, () => client().sendCommand(cmd), 5_000)).role, 'sent');
    // Three windows; longer than the command timeout (400 ms), shorter than the socket's (800 ms): the script waits in Redis.
    await pauseWrites(suite.redis.url, 700);
    const res = await runCommand(b, cmd, () => client().sendCommand(cmd), 5_000);
    assert.equal(res.role, 'duplicate', JSON.stringify(res));
    assert.equal(sim.counters.startArrivals, 1, 'one START at the service');
  });

  /** One replica watching one token through the nemesis, its events recorded. */
  async function watching(token: string, wrap?: (commit: (t: string, s: SavedState | null) => Promise<boolean>, w: () => SessionWatcher) => (t: string, s: SavedState | null) => Promise<boolean>) {
    const fleet = viaNemesis();
    const events: WatchEvent[] = [];
    let watcher: SessionWatcher | null = null;
    const own = fleet.scope<SavedState>('w', {
      onChange: (ch) => {
        if (ch.released.length > 0) watcher?.unwatch(ch.released.map((r) => r.item));
        if (ch.acquired.length > 0) watcher?.watch(ch.acquired.map((x) => x.item), (t) => ch.acquired.find((x) => x.item === t)?.saved?.state ?? undefined);
      },
    });
    const commit = (t: string, s: SavedState | null) => own.commit(t, s).then((r) => r.ok);
    const poller = client();
    watcher = new SessionWatcher(
      (t) => poller.getProgress(t).then((r) => r.record),
      { intervalMs: 200, confirmEndMs: 50, mayPoll: (t) => own.holds(t), commit: wrap ? wrap(commit, () => watcher as SessionWatcher) : commit },
      (e) => events.push(e),
      () => undefined,
    );
    watchers.push(watcher);
    await own.add([token]);
    return { fleet, own, events, kinds: () => events.filter((e) => e.token === token).map((e) => e.event) };
  }

  async function startAndStop(token: string, before: () => boolean): Promise<void> {
    const c = client();
    const started = await c.sendCommand(startCommand({ locationId: 'L', evseId: '1', token }));
    assert.equal(started.statusCode, 202);
    await until(before, 'started reported', 8_000);
    await c.sendCommand(stopCommand({ locationId: 'L', evseId: '1', token, transactionId: String(sim.session(token)?.transactionId) }));
  }

  it('a commit whose reply is lost to a reconnect: the retry with the same commit id succeeds, ended goes out once', async () => {
    let faulted = false;
    const w = await watching('RFID-LOST-COMMIT', (commit) => (t, s) => {
      if (s === null && !faulted) {
        faulted = true;
        nemesis.withhold();
        setTimeout(() => nemesis.heal(), 250);
      }
      return commit(t, s);
    });
    await startAndStop('RFID-LOST-COMMIT', () => w.kinds().includes('started'));
    await until(() => faulted, 'the end seen');
    await until(() => w.kinds().includes('ended'), `ended (events: ${w.kinds().join(', ')}; nemesis: ${nemesis.log.join(', ')})`, 8_000);
    await sleep(800);
    assert.deepEqual(w.kinds().filter((k) => k === 'ended' || k === 'started'), ['started', 'ended']);
  });

  it('a commit that succeeded while its token was being released is emitted (the commit is the point of truth)', async () => {
    let released = false;
    const w = await watching('RFID-RELEASED', (commit, watcher) => async (t, s) => {
      const ok = await commit(t, s);
      if (s === null && ok && !released) {
        // The ownership's release lands between the commit's answer and its delivery.
        released = true;
        watcher().unwatch([t]);
      }
      return ok;
    });
    await startAndStop('RFID-RELEASED', () => w.kinds().includes('started'));
    await until(() => released, 'the end committed', 8_000);
    await sleep(100);
    assert.deepEqual(w.kinds().filter((k) => k !== 'pending'), ['started', 'ended']);
  });
});
