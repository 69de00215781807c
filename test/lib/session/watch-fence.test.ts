/**
 * A watch poll with replicas waits its turn in the request budget (or the
 * process stands still: SIGSTOP, a long GC) after the schedule asked whether
 * this replica holds the token's lease. A lease lost meanwhile must stop the
 * poll before it goes on the wire: its answer could not be committed, and
 * the request would be spent from the fleet's budget for nothing (found by
 * the nemesis over processes: a poll 84 ms after SIGCONT on a lapsed lease).
 * Real client, real simulator over HTTP, the node's own poll function.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { progressPoll } from '../../../nodes/common/watch-mode';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { SessionWatcher } from '../../../nodes/lib/session/watcher';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, startSimulator, until } from '../../harness';

describe('watch polls are fenced by the lease right before they go out (simulator over HTTP)', function () {
  this.timeout(20_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient | null = null;
  let watcher: SessionWatcher | null = null;
  afterEach(async () => {
    watcher?.close();
    await client?.close();
    await sim?.stop();
  });

  it('polls queued in the budget when their lease goes are not sent, take no place in it, and fail nowhere; the token still held is polled on', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { maxRequestsPerSec: 1 });
    const held = new Set(['F-1', 'F-2', 'F-3', 'F-4']);
    const errors: string[] = [];
    const outcomes: string[] = [];
    watcher = new SessionWatcher(
      progressPoll(client, { priority: 'poll' }),
      {
        intervalMs: 100,
        mayPoll: (t) => held.has(t),
        commit: async () => true,
        onPolled: (t, err) => outcomes.push(`${t}:${err ? err.code : 'ok'}`),
      },
      () => undefined,
      (t, err) => errors.push(`${t}: ${err.code} ${err.message}`),
    );
    const polled = () => sim.requests.filter((r) => r.method === 'GET' && r.path === SESSIONS_PATH).map((r) => r.query.token);
    watcher.watch([...held]);
    // At one request per second the first poll goes at once; the other three wait for their places.
    await until(() => polled().length === 1, 'the first poll', 5_000);
    await sleep(200);
    const first = polled()[0];
    for (const t of [...held]) if (t !== first) held.delete(t);
    // Without the drop in the budget's queue, the three stopped polls took the places of the next 3 s, and the token still held waited behind them.
    await sleep(3_500);
    const after = polled().slice(1);
    assert.deepEqual(
      after.filter((t) => t !== first),
      [],
      `no poll of a token whose lease went while it waited: ${after.join(' ')}`,
    );
    assert.ok(after.length >= 2, `the token still held is polled on at the budget, not behind the polls stopped: ${after.length} more polls in 3.5 s at 1/s`);
    assert.deepEqual(errors, [], 'a poll the fence stopped is not an error at Catch');
    assert.deepEqual(
      outcomes.filter((o) => !o.endsWith(':ok')),
      [],
      'nor a failed poll (which would count toward this replica standing down)',
    );
  });
});
