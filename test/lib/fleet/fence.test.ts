/**
 * The fence on charging-control's commands across replicas: a holder whose
 * lease lapsed while its START waited in the client (here: Max requests per
 * second holding it) does not send it once another replica holds the target,
 * and the new holder does not send the inherited START again before the old
 * holder's could no longer go out (its message budget plus the lease), even
 * with a short wait setting. Real Redis (through a nemesis for the old
 * holder), the simulator, two replicas as two processes run them.
 */
import assert from 'node:assert/strict';
import { ControlBook } from '../../../nodes/lib/control/book';
import type { ControlDeps, ControlSnapshot } from '../../../nodes/lib/control/controller';
import { emptyMemory, type ControlSettings } from '../../../nodes/lib/control/memory';
import type { ControlTarget } from '../../../nodes/lib/control/view';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';

import { DEFAULT_RETRY } from '../../../nodes/lib/client/request';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { monotonicNow } from '../../../nodes/lib/clock';
import { fenceInherited, openControlShare, type ControlShare } from '../../../nodes/lib/control/control-share';
import { RedisCoordination } from '../../../nodes/lib/fleet/coordination';
import type { NodeLifecycle } from '../../../nodes/common/node-lifecycle';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator, until } from '../../harness';
import { RedisNemesis } from '../../redis-nemesis';
import { fleetSuite } from './fleet-fixture';
import { controlSettings } from '../control/settings';

/** With replicas the node's own store is not used: memory is committed through the leases. */
const NO_LOCAL_STORE = { load: async () => [], save: async () => undefined, clear: async () => undefined };
const SETTINGS = controlSettings({ guardMs: 0, checkMs: 300, confirmMs: 100 });
const TARGET: ControlTarget = { locationId: 'LOC-F', evseId: '1', token: 'RFID-FENCE' };
const KEY = JSON.stringify([TARGET.locationId, TARGET.evseId, TARGET.token]);
const SCOPE = 'control-node-fence';
/** The old holder's client: one request every 2.5 s, so that its START waits in the budget after the progress query. */
const SLOW_RATE = 0.4;

interface Replica {
  fleet: Fleet;
  link: ControlShare;
  book: ControlBook;
  states: ControlSnapshot[];
  errors: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('charging-control across replicas: the fence on commands (real Redis, simulator)', function () {
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  let nemesis: RedisNemesis;
  const clients: ServiceClient[] = [];
  const replicas: Replica[] = [];
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 50, stopDelayMs: 50 });
    nemesis = await RedisNemesis.start(suite.redis.port);
  });
  afterEach(async () => {
    for (const r of replicas.splice(0)) {
      r.book.close();
      await r.link.close(false);
    }
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await nemesis.close();
    await sim.stop();
  });

  function replica(fleet: Fleet, client: ServiceClient, settings: ControlSettings): Replica {
    clients.push(client);
    const errors: string[] = [];
    const life = { warnOnce: (_k: string, t: string) => errors.push(t), report: (e: unknown) => errors.push(String(e)) } as unknown as NodeLifecycle;
    const link = openControlShare(new RedisCoordination(fleet).leases, SCOPE, life, NO_LOCAL_STORE);
    const states: ControlSnapshot[] = [];
    const deps: ControlDeps = {
      poll: (t) => client.getProgress(t.token).then((r) => r.record),
      send: (c, mayProceed) => client.sendCommand(c, { mayProceed }),
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
    const book = new ControlBook(settings, deps);
    link.attach(book, settings, () => undefined);
    const r = { fleet, link, book, states, errors };
    replicas.push(r);
    return r;
  }

  const posts = (action: string) => sim.requests.filter((q) => q.method === 'POST' && q.path.startsWith(SESSIONS_PATH) && q.body.includes(`"${action}"`)).length;
  const queries = () => sim.requests.filter((q) => q.method === 'GET' && q.path.startsWith(SESSIONS_PATH)).length;

  /**
   * The old holder (through the nemesis, its client slow) takes the target
   * and the wish "on", commits its START and queues it in the budget; then
   * Redis goes silent for it, its lease lapses, and the new holder takes the
   * target with the committed START. Returns both once the new one holds it.
   */
  async function lapseWithStartQueued(newSettings: ControlSettings): Promise<{ old: Replica; next: Replica; queuedAt: number }> {
    const old = replica(suite.replica({ url: nemesis.urlFor(suite.redis.url) }), clientFor(sim, { timeoutMs: 3000, maxRequestsPerSec: SLOW_RATE }), SETTINGS);
    await old.link.want(TARGET, true, {});
    await until(() => queries() >= 1, 'the old holder read progress', 5_000);
    const queuedAt = monotonicNow();
    const admin = suite.redis.admin();
    const stateKey = old.fleet.keys.scope(`control:${SCOPE}`).state;
    for (const end = monotonicNow() + 5_000; !String(await admin.hget(stateKey, KEY)).includes('"action":"START"'); await sleep(20)) {
      if (monotonicNow() > end) throw new Error('timed out waiting for the START committed before it is sent');
    }
    nemesis.blackhole();
    const next = replica(suite.replica(), clientFor(sim, { timeoutMs: 3000 }), newSettings);
    await until(() => next.book.get(KEY) !== undefined, 'the new holder took the target', 5_000);
    return { old, next, queuedAt };
  }

  it('a holder whose lease lapsed while its START waited in the client does not send it once another replica holds the target', async () => {
    const { old, queuedAt } = await lapseWithStartQueued(SETTINGS);
    assert.equal(old.fleet.opened(`control:${SCOPE}`)?.holds(KEY), false, 'the old holder knows its lease lapsed');
    // The old START's place in the budget came 1/rate after the query; a little longer for a loaded machine.
    await sleep(Math.max(0, queuedAt + 1000 / SLOW_RATE + 1000 - monotonicNow()));
    assert.equal(posts('START'), 0, 'no START from the replica that lost its lease');
    await until(() => old.errors.some((e) => e.includes('no longer holds the target')), `the old holder reports its START not sent (errors: ${old.errors.join(' | ')})`, 8_000);
    assert.match(old.errors.find((e) => e.includes('no longer holds')) ?? '', /nothing was sent/);
  });

  it('the new holder, with a short wait, does not send the inherited START again before the old one could no longer go out', async () => {
    const short = { ...SETTINGS, waitMs: 300 };
    const { next } = await lapseWithStartQueued(short);
    await until(() => next.states.length > 0, 'a check by the new holder', 3_000);
    await sleep(1_500); // five times its wait: without the fence it would have sent START again by now
    assert.equal(posts('START'), 0, 'the inherited START is not sent again while the old one could still go out');
    assert.equal(next.states.at(-1)?.state, 'starting', `waiting for the inherited START (reason: ${next.states.at(-1)?.reason})`);
  });

  it('the hold on an inherited START is the message budget plus the lease from the take-over; a STOP is not held', () => {
    const m = emptyMemory();
    m.command = { action: 'START', at: 1_000 };
    fenceInherited(m, 5_000, 300, 600);
    assert.equal((m.command.at as number) + 300, 5_000 + DEFAULT_RETRY.maxTotalMs + 600, 'START: its wait ends no sooner than the budget plus the lease after the take-over');
    const s = emptyMemory();
    s.command = { action: 'STOP', at: 1_000, transactionId: 'tx' };
    fenceInherited(s, 5_000, 300, 600);
    assert.equal(s.command.at, 1_000, 'STOP: sent again after its wait as before');
  });
});

describe('the client: a command asks its fence right before each attempt goes on the wire (simulator)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 50, stopDelayMs: 50 });
    client = clientFor(sim, { timeoutMs: 3000 });
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });
  const start = { action: 'START' as const, ...TARGET };
  const posts = () => sim.requests.filter((q) => q.method === 'POST' && q.path.startsWith(SESSIONS_PATH)).length;

  it('a fence that says no: the command fails, says it was not sent, and is not sent', async () => {
    let asked = 0;
    const err = await client.sendCommand(start, { mayProceed: () => (asked++, false) }).then(() => null, (e: unknown) => e as { code: string; message: string; outcomeUnknown?: boolean });
    assert.ok(err, 'the command failed');
    assert.equal(err.code, 'NETWORK');
    assert.match(err.message, /no longer holds the target.*nothing was sent/);
    assert.notEqual(err.outcomeUnknown, true);
    assert.equal(asked, 1, 'asked once, not tried again');
    assert.equal(posts(), 0);
  });

  it('a fence that does not answer in time, or fails, says no: nothing is sent', async () => {
    const hung = await client.sendCommand(start, { mayProceed: () => new Promise<boolean>(() => undefined) }).then(() => null, (e: unknown) => e as Error);
    assert.match(String(hung?.message), /could not be checked within 1000 ms; nothing was sent/);
    const failed = await client.sendCommand(start, { mayProceed: () => Promise.reject(new Error('Redis away')) }).then(() => null, (e: unknown) => e as Error);
    assert.match(String(failed?.message), /Redis away.*nothing was sent/);
    let asked = 0;
    const threw = await client
      .sendCommand(start, {
        mayProceed: () => {
          asked++;
          throw new Error('lease map gone');
        },
      })
      .then(() => null, (e: unknown) => e as Error);
    assert.match(String(threw?.message), /lease map gone.*nothing was sent/);
    assert.equal(asked, 2, 'a fence that throws is asked once more, where its failure is reported, and the command not tried again');
    assert.equal(posts(), 0);
  });

  it('a fence that says yes (at once or later), or none at all: the command goes as before', async () => {
    await client.sendCommand(start, { mayProceed: () => true });
    await client.sendCommand({ action: 'STOP', ...TARGET, transactionId: 'none' }, { mayProceed: () => Promise.resolve(true) }).catch(() => undefined);
    await client.sendCommand({ ...start, evseId: '2', token: 'RFID-OTHER' });
    assert.equal(posts(), 3);
  });
});
