/**
 * Max requests per second when the fleet's budget goes silent under queued
 * requests (a black hole between a replica and Redis): each request waits out
 * its Redis command timeout, then falls back to this replica's share. The
 * requests that took their local place before Redis went silent were spaced
 * at the fleet's whole rate; they must not go out at that rate beside the
 * other replicas, which keep the whole budget through Redis. Counted at the
 * service by arrival time.
 */
import assert from 'node:assert/strict';
import type { SharedBudgetGate } from '../../../nodes/lib/client/admission';
import type { FleetHooks } from '../../../nodes/lib/client/fleet-hooks';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { busiestSecond, clientFor, startSimulator } from '../../harness';

const LIMIT = 6;
const REPLICAS = 3;
/** the gate's silence before its first answer, as a command timeout into a black hole */
const SILENT_MS = 1_000;

/** The fleet's budget behind a black hole: every take asked before Redis is known down hangs, then says "unavailable". */
function silentGate(): SharedBudgetGate & { takes: number } {
  let known = false;
  const gate = {
    takes: 0,
    take: (): Promise<{ kind: 'unavailable' }> => {
      gate.takes++;
      if (known) return Promise.resolve({ kind: 'unavailable' });
      return new Promise((resolve) =>
        setTimeout(() => {
          known = true;
          resolve({ kind: 'unavailable' });
        }, SILENT_MS),
      );
    },
    fallbackRate: () => LIMIT / REPLICAS,
  };
  return gate;
}

describe('Max requests per second when the fleet budget goes silent (simulator over HTTP)', function () {
  this.timeout(30_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient | null = null;
  afterEach(async () => {
    await client?.close();
    await sim?.stop();
  });

  it(`queries queued while Redis is silent go out at this replica's share (${LIMIT}/${REPLICAS} per second), not at the fleet's whole rate`, async () => {
    sim = await startSimulator();
    const gate = silentGate();
    const fleet: FleetHooks = { fetchToken: (fetchLocal) => fetchLocal(), invalidateToken: () => undefined, budget: () => gate };
    client = clientFor(sim, { maxRequestsPerSec: LIMIT, timeoutMs: 20_000, fleet });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (client as ServiceClient).getProgress(`SILENT-${i}`)));
    assert.equal(answers.length, 8, 'every query answered');
    assert.ok(gate.takes >= 8, `each query asked the fleet's budget (${gate.takes})`);
    const times = sim.requests.filter((r) => r.path === SESSIONS_PATH).map((r) => r.at);
    assert.equal(times.length, 8);
    const most = busiestSecond(sim);
    assert.ok(most <= LIMIT / REPLICAS + 1, `at most the share + 1 = ${LIMIT / REPLICAS + 1} in any second, saw ${most} (ms: ${times.map((t) => t - times[0]).join(' ')})`);
  });
});
