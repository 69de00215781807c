/**
 * Max requests per second after the process stood still (a GC pause, SIGSTOP,
 * a blocked event loop) while requests waited for their start: the starts
 * whose time passed meanwhile must not all go out when it wakes. Counted
 * where the operator counts, at the service by arrival time, alone and with
 * replicas sharing the fleet's budget in real Redis.
 */
import assert from 'node:assert/strict';
import type { SharedBudgetGate } from '../../../nodes/lib/client/admission';
import type { FleetHooks } from '../../../nodes/lib/client/fleet-hooks';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { busiestSecond, clientFor, startSimulator, until } from '../../harness';
import { fleetSuite } from '../fleet/fleet-fixture';

const LIMIT = 5;
const STALL_MS = 1_500;

/** Stands the whole process still, as a long GC pause or SIGSTOP would: no timer, no socket, nothing runs. */
function stall(ms: number): void {
  const end = performance.now() + ms;
  let spins = 0;
  while (performance.now() < end) spins++;
  assert.ok(spins > 0);
}

function arrivals(sim: ChargingServiceSimulator): number {
  return sim.requests.filter((r) => r.path === SESSIONS_PATH).length;
}

/** Queries from every client at once; the process stalls once a few have arrived, while the rest wait for their start. */
async function stallWhileQueued(sim: ChargingServiceSimulator, clients: ServiceClient[], perClient: number): Promise<void> {
  const before = arrivals(sim);
  const queries = clients.flatMap((c, k) => Array.from({ length: perClient }, (_, i) => c.getProgress(`STALL-${k}-${i}`)));
  await until(() => arrivals(sim) >= before + 2, 'the first queries to arrive');
  stall(STALL_MS);
  const answers = await Promise.all(queries);
  assert.equal(answers.length, clients.length * perClient, 'every query answered');
}

describe('Max requests per second after the process stood still (simulator over HTTP)', function () {
  this.timeout(30_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  const clients: ServiceClient[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await sim?.stop();
  });

  it(`replicas sharing the fleet's budget: a ${STALL_MS} ms stall sends no burst, never more than ${LIMIT} + 1 in any 1 s at the service`, async () => {
    sim = await startSimulator();
    const fleets = [suite.replica(), suite.replica()];
    await Promise.all(fleets.map((f) => f.connection.open()));
    for (const f of fleets) clients.push(clientFor(sim, { maxRequestsPerSec: LIMIT, timeoutMs: 5_000, fleet: f.clientHooks() }));
    await Promise.all(clients.map((c) => c.getProgress('warm-up')));
    await stallWhileQueued(sim, clients, 8);
    const most = busiestSecond(sim);
    assert.ok(most <= LIMIT + 1, `busiest second at the service held ${most} requests`);
  });

  it(`this replica alone (the local budget): a ${STALL_MS} ms stall sends no burst either`, async () => {
    sim = await startSimulator();
    clients.push(clientFor(sim, { maxRequestsPerSec: LIMIT, timeoutMs: 5_000 }));
    await clients[0].getProgress('warm-up');
    await stallWhileQueued(sim, clients, 14);
    const most = busiestSecond(sim);
    assert.ok(most <= LIMIT + 1, `busiest second at the service held ${most} requests`);
  });

  it('an answer from the fleet budget slower than a spacing is taken again once, not sent on; a budget always that slow still lets every query through', async () => {
    sim = await startSimulator();
    let takes = 0;
    // Every answer 300 ms after the question, at 5/s (200 ms apart): its start may have passed while it travelled.
    const slowGate: SharedBudgetGate = {
      take: () => new Promise((resolve) => setTimeout(() => resolve((takes++, { kind: 'go', delayMs: 0 })), 300)),
      fallbackRate: () => LIMIT,
    };
    const fleet: FleetHooks = { fetchToken: (fetchLocal) => fetchLocal(), invalidateToken: () => undefined, budget: () => slowGate };
    clients.push(clientFor(sim, { maxRequestsPerSec: LIMIT, timeoutMs: 5_000, fleet }));
    for (let i = 0; i < 3; i++) await clients[0].getProgress(`SLOW-${i}`);
    assert.equal(arrivals(sim), 3, 'every query answered');
    assert.equal(takes, 6, 'two takes per query: the slow answer taken again once, the second slow one used');
  });
});
