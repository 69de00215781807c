/**
 * A replica that reaches Redis but not the service (here: a wrong client
 * secret, the token endpoint refuses it) gives its share of the watched
 * tokens to the others after a few failed polls in a row, probes the service
 * meanwhile, and takes its share back once the service answers it. The last
 * replica standing never gives up its share.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { StandDown } from '../../../nodes/lib/fleet/stand-down';
import { clientFor, startSimulator, until } from '../../harness';
import { fleetSuite, sleep } from './fleet-fixture';

const TOKENS = Array.from({ length: 20 }, (_, i) => `RFID-SD-${i}`);

describe('fleet: a replica that cannot reach the service stands down (real Redis, simulator)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  let good: ServiceClient;
  let bad: ServiceClient;
  const downs: StandDown[] = [];
  beforeEach(async () => {
    sim = await startSimulator();
    good = clientFor(sim);
    bad = clientFor(sim, { clientSecret: 'not-the-secret' });
  });
  afterEach(async () => {
    for (const d of downs.splice(0)) d.close();
    await good.close();
    await bad.close();
    await sim.stop();
  });

  /** One failed poll through the client with the wrong secret, told to the stand-down as the watcher would. */
  async function failedPoll(sd: StandDown): Promise<void> {
    const err = await bad.getProgress(TOKENS[0]).then(
      () => null,
      (e: unknown) => e as ChargingError,
    );
    assert.ok(err instanceof ChargingError && err.code === 'AUTH', String(err));
    sd.polled(err);
  }

  it('three failed polls in a row: its tokens go to the other replica; the first probe that gets through takes them back', async () => {
    const [a, b] = [suite.replica(), suite.replica()];
    const ownA = a.ownership<unknown>('w');
    const ownB = b.ownership<unknown>('w');
    await ownA.watch(TOKENS);
    await until(() => ownA.owned().length > 0 && ownB.owned().length > 0 && ownA.owned().length + ownB.owned().length === TOKENS.length, 'both own a share', 8_000);
    let reachable = false;
    const told: boolean[] = [];
    const sd = new StandDown(ownA, a.replicaId, () => (reachable ? good : bad).getProgress(TOKENS[0]), { probeMs: 100, onChange: (down) => told.push(down) });
    downs.push(sd);
    await failedPoll(sd);
    sd.polled(null); // an answer in between: the count starts again
    await failedPoll(sd);
    await failedPoll(sd);
    assert.equal(sd.standingDown, false, 'two in a row are not enough');
    await failedPoll(sd);
    assert.equal(sd.standingDown, true);
    await until(() => ownA.owned().length === 0 && ownB.owned().length === TOKENS.length, 'the other replica owns every token', 8_000);
    await sleep(500);
    assert.equal(ownA.owned().length, 0, 'still standing down while the probes fail');
    reachable = true;
    await until(() => ownA.owned().length > 0 && ownA.owned().length + ownB.owned().length === TOKENS.length, 'its share back', 8_000);
    assert.deepEqual(told, [true, false]);
  });

  it('the only replica does not stand down: polling in vain is still the best anyone can do', async () => {
    const a = suite.replica();
    const own = a.ownership<unknown>('w');
    await own.watch(TOKENS);
    await until(() => own.owned().length === TOKENS.length, 'it owns every token', 8_000);
    const sd = new StandDown(own, a.replicaId, () => bad.getProgress(TOKENS[0]), { probeMs: 100 });
    downs.push(sd);
    for (let i = 0; i < 5; i++) await failedPoll(sd);
    assert.equal(sd.standingDown, false);
    await sleep(500);
    assert.equal(own.owned().length, TOKENS.length);
  });
});
