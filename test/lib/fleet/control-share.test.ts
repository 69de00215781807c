/**
 * charging-control across replicas (issue 35 item 5): two replicas (each a
 * Fleet, a ControlBook and the node's FleetControlLink, as two Node-RED
 * processes run them) on one control node's scope, against the simulator
 * and a real Redis. Only the target's holder sends; a wish that reaches
 * every replica is one wish; a hand-over takes the memory (the guard's
 * clock) with it.
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import type { ControlTarget } from '../../../nodes/lib/control/view';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { monotonicNow } from '../../../nodes/lib/clock';
import { openControlShare, type ControlShare } from '../../../nodes/lib/control/control-share';
import { RedisCoordination } from '../../../nodes/lib/fleet/coordination';
import type { NodeLifecycle } from '../../../nodes/common/node-lifecycle';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator, until } from '../../harness';
import { fleetSuite } from './fleet-fixture';
import { pauseWrites } from '../../redis-nemesis';
import { controlSettings } from '../control/settings';

/** With replicas the node's own store is not used: memory is committed through the leases. */
const NO_LOCAL_STORE = { load: async () => [], save: async () => undefined, clear: async () => undefined };
const SETTINGS = controlSettings({ guardMs: 60_000, checkMs: 300, confirmMs: 100, waitMs: 3_000 });
const TARGET: ControlTarget = { locationId: 'LOC-C', evseId: '1', token: 'RFID-CTL' };

interface Replica {
  fleet: Fleet;
  link: ControlShare;
  book: ControlBook;
  states: ControlSnapshot[];
  errors: string[];
}

describe('charging-control across replicas: one holder per target (real Redis, simulator)', function () {
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  const replicas: Replica[] = [];
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 50, stopDelayMs: 50 });
    client = clientFor(sim, { timeoutMs: 3000 });
  });
  afterEach(async () => {
    for (const r of replicas.splice(0)) {
      r.book.close();
      await r.link.close(false);
    }
    await client.close();
    await sim.stop();
  });

  function replica(): Replica {
    const fleet = suite.replica();
    const errors: string[] = [];
    const life = { warnOnce: (_k: string, t: string) => errors.push(t), report: (e: unknown) => errors.push(String(e)) } as unknown as NodeLifecycle;
    const link = openControlShare(new RedisCoordination(fleet).leases, 'control-node-1', life, NO_LOCAL_STORE);
    const states: ControlSnapshot[] = [];
    const deps: ControlDeps = {
      poll: (t) => client.getProgress(t.token).then((r) => r.record),
      send: (c) => client.sendCommand(c),
      clock: {
        now: monotonicNow,
        wall: () => Date.now(),
        after(ms, fn) {
          const t = setTimeout(fn, ms);
          return () => clearTimeout(t);
        },
      },
      onState: (s) => states.push(s),
      onError: (_t, e) => errors.push(e.message),
      ...link.deps(),
    };
    const book = new ControlBook(SETTINGS, deps);
    link.attach(book, { waitMs: 0 }, () => undefined);
    const r = { fleet, link, book, states, errors };
    replicas.push(r);
    return r;
  }

  const posts = (action: string) => sim.requests.filter((q) => q.method === 'POST' && q.path.startsWith(SESSIONS_PATH) && q.body.includes(`"${action}"`)).length;
  const holder = (rs: Replica[]) => rs.filter((r) => r.book.get(JSON.stringify([TARGET.locationId, TARGET.evseId, TARGET.token])) !== undefined);

  it('a wish sent to every replica is one wish: one START, the state reported by the holder alone', async () => {
    const rs = [replica(), replica()];
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2), 'both replicas in the scope', 5_000);
    await Promise.all(rs.map((r) => r.link.want(TARGET, true, {})));
    await until(() => rs.some((r) => r.states.some((s) => s.state === 'charging')), 'charging', 8_000);
    await new Promise((r) => setTimeout(r, 700)); // a few more checks on both
    assert.equal(posts('START'), 1);
    assert.equal(holder(rs).length, 1, 'one replica holds the target');
    const [other] = rs.filter((r) => !holder(rs).includes(r));
    assert.equal(other.states.length, 0, 'the other replica neither checks nor reports');
  });

  it('a wish that reaches only the replica without the lease is carried out by the holder', async () => {
    const rs = [replica(), replica()];
    // The target joins the fleet's list through one wish; then the other replica alone gets "on".
    // Both replicas in the scope first: the holder found below is then the one rendezvous hashing keeps.
    await rs[0].link.want(TARGET, false, {});
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2) && holder(rs).length === 1, 'both replicas in the scope, and a holder', 5_000);
    const [h] = holder(rs);
    const [notHolder] = rs.filter((r) => r !== h);
    const reportedBefore = notHolder.states.length; // it may have held the target before the other joined
    await notHolder.link.want(TARGET, true, {});
    await until(() => h.states.some((s) => s.state === 'charging'), 'the holder charging', 8_000).catch((e) => {
      console.log(JSON.stringify(rs.map((r) => ({ states: r.states.map((s) => [s.state, s.wanted, s.reason]), errors: r.errors }))), posts('START'));
      throw e;
    });
    assert.equal(posts('START'), 1);
    assert.equal(notHolder.states.length, reportedBefore, 'nothing reported by the replica without the lease');
  });

  it('a wish after Redis lost its data is carried out: the messages\' numbers never go back below those the holder applied', async () => {
    const rs = [replica(), replica()];
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2), 'both replicas in the scope', 5_000);
    for (const on of [true, false, true]) await Promise.all(rs.map((r) => r.link.want(TARGET, on, {})));
    await until(() => rs.some((r) => r.states.at(-1)?.state === 'charging') && sim.session(TARGET.token) !== undefined, 'charging', 8_000);
    const stopsBefore = posts('STOP');
    const admin = suite.redis.admin();
    try {
      await admin.flushall(); // a Redis restarted without its data, or a failover to a replica that was behind
    } finally {
      admin.disconnect();
    }
    await new Promise((r) => setTimeout(r, 1_000)); // the holder puts its state back; the list is rebuilt
    await Promise.all(rs.map((r) => r.link.want(TARGET, false, { force: true })));
    await until(() => !sim.session(TARGET.token), 'the STOP after the data loss', 8_000).catch((e) => {
      console.log(JSON.stringify(rs.map((r) => ({ states: r.states.slice(-3).map((x) => [x.state, x.wanted, x.reason]), errors: r.errors }))));
      throw e;
    });
    assert.equal(posts('STOP'), stopsBefore + 1, 'one STOP for the off');
  });

  it('a wish given while Redis takes no writes (a failover, a write pause) is kept once it does, and one replica\'s wishes keep their order', async () => {
    const rs = [replica(), replica()];
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2), 'both replicas in the scope', 5_000);
    await Promise.all(rs.map((r) => r.link.want(TARGET, true, {})));
    await until(() => sim.session(TARGET.token) !== undefined, 'charging', 8_000);
    await pauseWrites(suite.redis.url, 1_500); // longer than the command timeout (400 ms) and the socket's (800 ms)
    // Three wishes on one replica while the pause lasts (wishes on two replicas at once have no order between them).
    const [off, on, offAgain] = [rs[0].link.want(TARGET, false, { force: true }), rs[0].link.want(TARGET, true, {}), rs[0].link.want(TARGET, false, { force: true })];
    assert.deepEqual(await Promise.all([off, on, offAgain]), [undefined, undefined, undefined], 'no error: each kept, or replaced by a newer one');
    await until(() => !sim.session(TARGET.token), 'the STOP the last wish asked for', 8_000);
    await new Promise((r) => setTimeout(r, 1_000)); // more checks: the last wish stands
    assert.equal(sim.session(TARGET.token), undefined, `off, as the last wish said: ${JSON.stringify(rs.map((r) => r.states.slice(-4).map((x) => [x.state, x.wanted, x.reason])))}`);
  });

  it('a hand-over takes the memory along: the new holder keeps the guard after the STOP its predecessor sent, and sends nothing twice', async () => {
    const rs = [replica(), replica()];
    await Promise.all(rs.map((r) => r.link.want(TARGET, true, {})));
    await until(() => rs.some((r) => r.states.some((s) => s.state === 'charging')), 'charging', 8_000);
    await Promise.all(rs.map((r) => r.link.want(TARGET, false, { force: true })));
    await until(() => posts('STOP') === 1 && !sim.session(TARGET.token), 'stopped', 8_000);
    const [first] = holder(rs);
    const [second] = rs.filter((r) => r !== first);
    // The holder leaves (a redeploy, a clean stop): the other takes the target over with its memory.
    first.book.close();
    await first.link.close(false);
    replicas.splice(replicas.indexOf(first), 1);
    await until(() => second.book.get(JSON.stringify([TARGET.locationId, TARGET.evseId, TARGET.token])) !== undefined, 'the take-over', 5_000);
    await second.link.want(TARGET, true, {});
    await until(() => second.states.some((s) => s.state === 'guard'), 'the guard on the new holder', 5_000);
    assert.equal(posts('START'), 1, 'no START inside the guard kept by the predecessor');
    assert.equal(posts('STOP'), 1);
  });

  /** The holder leaves (a redeploy, a rolling update): the other replica takes the target over with the memory it kept. */
  async function handOver(rs: Replica[]): Promise<Replica> {
    const [first] = holder(rs);
    const [second] = rs.filter((r) => r !== first);
    first.book.close();
    await first.link.close(false);
    replicas.splice(replicas.indexOf(first), 1);
    await until(() => second.book.get(JSON.stringify([TARGET.locationId, TARGET.evseId, TARGET.token])) !== undefined, 'the take-over', 5_000);
    await until(() => second.states.length > 0, 'a check by the new holder', 5_000);
    await new Promise((r) => setTimeout(r, 700)); // a few checks and a fleet cycle
    return second;
  }

  async function atStation(action: 'START' | 'STOP'): Promise<void> {
    const tx = sim.session(TARGET.token)?.transactionId;
    await client.sendCommand(action === 'START' ? { action, ...TARGET } : { action, ...TARGET, transactionId: tx });
  }

  it('a hand-over never applies an applied wish again: {on, restart} and a session the driver ended at the station: no START', async () => {
    const rs = [replica(), replica()];
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2), 'both replicas in the scope', 5_000);
    await rs[0].link.want(TARGET, true, { restart: true });
    await until(() => rs.some((r) => r.states.some((s) => s.state === 'charging')), 'charging', 8_000);
    await atStation('STOP');
    await until(() => rs.some((r) => r.states.at(-1)?.reason === 'ended at the station'), 'ended at the station', 8_000);
    const second = await handOver(rs);
    assert.equal(posts('START'), 1, 'the new holder did not START again');
    assert.equal(second.states.at(-1)?.state, 'idle');
  });

  it('a hand-over never applies an applied wish again: {off, force} and a session started at the station later: no STOP', async () => {
    const rs = [replica(), replica()];
    await until(() => rs.every((r) => (r.fleet.opened('control:control-node-1')?.replicas() ?? []).length === 2), 'both replicas in the scope', 5_000);
    await rs[0].link.want(TARGET, false, { force: true });
    await until(() => rs.some((r) => r.states.some((s) => s.state === 'idle')), 'idle', 8_000);
    await atStation('START');
    await until(() => rs.some((r) => r.states.at(-1)?.state === 'charging'), 'the station session seen', 8_000);
    const second = await handOver(rs);
    assert.equal(posts('STOP'), 0, 'the new holder did not stop the driver');
    assert.equal(second.states.at(-1)?.state, 'charging');
  });
});
