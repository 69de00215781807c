/**
 * Stand-down by comparison: a replica whose queries get no answer from the
 * service while a peer's do gives its watched tokens to the peer, probes, and
 * takes them back at the first answer; when every replica fails nobody stands
 * down; the only replica never does; a command it is given waits for a
 * healthy peer to claim it first. Real Redis, the simulator, and a client
 * with a wrong secret standing in for a replica cut off from the service.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { missedService } from '../../../nodes/lib/fleet/membership/service-reach';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';
import { startCommand } from '../../../nodes/lib/session/commands';
import { clientFor, startSimulator, until } from '../../harness';
import { fleetSuite, sleep, runCommand } from './fleet-fixture';

const TOKENS = Array.from({ length: 20 }, (_, i) => `RFID-SD-${i}`);

describe('fleet: which failures say a replica missed the service', () => {
  it('network, timeout, refused token, 429, 5xx and a gateway\'s 404 count; the service\'s 400 is an answer; input, closed and our own failures say nothing', () => {
    const http = (status: number) => new ChargingError('HTTP', `status ${status}`, { statusCode: status });
    assert.equal(missedService(null), false);
    for (const e of [new ChargingError('NETWORK', 'x'), new ChargingError('TIMEOUT', 'x'), new ChargingError('AUTH', 'x'), new ChargingError('RATE_LIMITED', 'x'), new ChargingError('BAD_RESPONSE', 'x'), http(503), http(502), http(404), http(403)]) {
      assert.equal(missedService(e), true, e.message + e.code);
    }
    for (const s of [400, 409, 410, 422]) assert.equal(missedService(http(s)), false, String(s));
    for (const c of ['CLOSED', 'INVALID_INPUT', 'MISSING_FIELD', 'CONFIG', 'INTERNAL'] as const) assert.equal(missedService(new ChargingError(c, 'x')), null, c);
  });
});

describe('fleet: a replica that misses the service where its peers get it stands down (real Redis, simulator)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  let good: ServiceClient;
  let bad: ServiceClient;
  beforeEach(async () => {
    sim = await startSimulator();
    good = clientFor(sim);
    bad = clientFor(sim, { clientSecret: 'not-the-secret' });
  });
  afterEach(async () => {
    await good.close();
    await bad.close();
    await sim.stop();
  });

  /** One poll through `client`, told to the replica's reach as the watcher tells it. */
  async function poll(f: Fleet, client: ServiceClient): Promise<void> {
    const err = await client.getProgress(TOKENS[0]).then(
      () => null,
      (e: unknown) => e as ChargingError,
    );
    f.reach.polled(err);
  }

  /** The peer gets answers for a while (past the margin for a peer's lag, 2 s), as a polling replica does. */
  async function answersMeanwhile(f: Fleet): Promise<void> {
    for (let i = 0; i < 17; i++) {
      await sleep(150);
      await poll(f, good);
    }
  }

  async function twoWatching(): Promise<[Fleet, Fleet, ReturnType<Fleet['scope']>, ReturnType<Fleet['scope']>]> {
    const [a, b] = [suite.replica(), suite.replica()];
    const ownA = a.scope<unknown>('w');
    const ownB = b.scope<unknown>('w');
    await ownA.add(TOKENS);
    await until(() => ownA.owned().length > 0 && ownB.owned().length > 0 && ownA.owned().length + ownB.owned().length === TOKENS.length, 'both own a share', 8_000);
    return [a, b, ownA, ownB];
  }

  it('three misses in a row while the peer gets answers: its tokens go to the peer; the first probe that gets through takes them back', async () => {
    const [a, b, ownA, ownB] = await twoWatching();
    let reachable = false;
    a.reach.probeWith(() => (reachable ? good : bad).getProgress(TOKENS[0]));
    await poll(a, bad);
    await poll(a, good); // an answer in between: the count starts again
    await poll(a, bad);
    await poll(a, bad);
    await answersMeanwhile(b);
    assert.equal(a.reach.standingDown, false, 'two in a row are not enough');
    await poll(a, bad);
    await until(() => a.reach.standingDown, 'it stands down once the healthy peer was seen for the confirmation time', 8_000);
    await until(() => ownA.owned().length === 0 && ownB.owned().length === TOKENS.length, 'the peer owns every token', 8_000);
    await sleep(500);
    assert.equal(ownA.owned().length, 0, 'still standing down while the probes fail');
    reachable = true;
    await until(() => ownA.owned().length > 0 && ownA.owned().length + ownB.owned().length === TOKENS.length, 'its share back', 10_000);
    assert.ok(suite.reported.some((t) => /gives its watched tokens and control targets to the others/.test(t)));
    assert.ok(suite.reported.some((t) => /takes its share of the watched tokens and control targets back: the service answers again/.test(t)));
  });

  it('every replica misses the service: nobody stands down, however late the other one notices (the service is down for everyone)', async () => {
    const [a, b, ownA, ownB] = await twoWatching();
    await poll(b, good);
    // a fails from now on; b, polling slowly, fails only a second later: its last answer came before a's streak.
    for (let i = 0; i < 5; i++) await poll(a, bad);
    await sleep(1_000);
    for (let i = 0; i < 5; i++) await Promise.all([poll(a, bad), poll(b, bad)]);
    await sleep(1_000);
    assert.equal(a.reach.standingDown || b.reach.standingDown, false);
    assert.equal(ownA.owned().length + ownB.owned().length, TOKENS.length);
    assert.ok(ownA.owned().length > 0 && ownB.owned().length > 0);
  });

  it('standing down, and then the healthy peer starts failing too: it comes back (the last one standing polls)', async () => {
    const [a, b, ownA] = await twoWatching();
    a.reach.probeWith(() => bad.getProgress(TOKENS[0]));
    for (let i = 0; i < 3; i++) await poll(a, bad);
    await answersMeanwhile(b);
    await until(() => a.reach.standingDown && ownA.owned().length === 0, 'it stood down', 8_000);
    for (let i = 0; i < 3; i++) await poll(b, bad);
    await until(() => !a.reach.standingDown && ownA.owned().length > 0, 'back with nobody healthy to give to', 8_000);
  });

  it('the only replica never stands down', async () => {
    const a = suite.replica();
    const own = a.scope<unknown>('w');
    await own.add(TOKENS);
    await until(() => own.owned().length === TOKENS.length, 'it owns every token', 8_000);
    for (let i = 0; i < 5; i++) await poll(a, bad);
    await sleep(600);
    assert.equal(a.reach.standingDown, false);
    assert.equal(own.owned().length, TOKENS.length);
  });

  it('a command given to both: the replica that misses the service lets the healthy peer claim and send it', async () => {
    const [a, b] = [suite.replica(), suite.replica()];
    await Promise.all([a.connection.open(), b.connection.open()]);
    for (let i = 0; i < 3; i++) await poll(a, bad);
    await answersMeanwhile(b);
    await until(() => a.reach.deferCommands, 'a sees a healthy peer', 3_000);
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-DEFER' });
    // The unreachable replica gets the command first; the healthy one 200 ms later.
    const fromA = runCommand(a, cmd, () => bad.sendCommand(cmd), 10_000);
    await sleep(200);
    const fromB = runCommand(b, cmd, () => good.sendCommand(cmd), 10_000);
    const [ra, rb] = await Promise.all([fromA, fromB]);
    assert.equal(rb.role, 'sent');
    assert.ok(ra.role === 'duplicate' && ra.outcome.ok && ra.from === b.replicaId, JSON.stringify(ra));
    assert.equal(sim.counters.starts, 1);
  });
});
