import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { SessionWatcher, WatchEvent } from '../../../nodes/lib/session/watcher';
import { clientFor, delay, startSimulator, until } from '../../harness';

/** When a watched session is "ended": only on a "no session" confirmed by a second query (issue 16.6). */
describe('SessionWatcher: an end is confirmed before it is reported (simulator over HTTP)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  let watcher: SessionWatcher | null = null;
  const events: WatchEvent[] = [];
  const errors: ChargingError[] = [];
  const CMD = { locationId: 'LOC-1', evseId: '2', token: 'RFID-E1' };

  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 20, stopDelayMs: 20 });
    // One attempt per query: a confirming query that fails must show as that failure.
    client = clientFor(sim, { retry: { getAttempts: 1 } });
    events.length = 0;
    errors.length = 0;
  });
  afterEach(async () => {
    watcher?.close();
    watcher = null;
    await client.close();
    await sim.stop();
  });

  const kinds = () => events.map((e) => e.event);
  const gets = () => sim.requests.filter((r) => r.method === 'GET').length;

  /** Starts a session and watches its token until the watcher has reported it started. */
  async function watchRunningSession(): Promise<string> {
    await client.sendCommand({ action: 'START', ...CMD });
    watcher = new SessionWatcher(
      async (token) => (await client.getProgress(token)).record,
      { intervalMs: 200, confirmEndMs: 50 },
      (e) => events.push(e),
      (_token, err) => errors.push(err),
    );
    watcher.watch([CMD.token]);
    await until(() => kinds().includes('started'), 'started');
    return events.find((e) => e.event === 'started')?.session?.transactionId as string;
  }

  async function stop(transactionId: string): Promise<void> {
    await client.sendCommand({ action: 'STOP', ...CMD, transactionId });
  }

  it('a single "not found" while the session is active sends no ended (and no second started)', async () => {
    const tx = await watchRunningSession();
    // The service's own "no session" answer (404, empty body), once, as a restarting backend gives it.
    sim.inject({ target: 'get', kind: 'status', status: 404, times: 1 });
    await until(() => sim.pendingFaults().length === 0, 'the 404 answered');
    const after = gets();
    await until(() => gets() >= after + 3, 'three more polls');
    // [pending] started, then updates only.
    assert.deepEqual(
      kinds().filter((k) => k !== 'updated' && k !== 'pending'),
      ['started'],
      `events: ${kinds().join()}`,
    );
    assert.equal(sim.session(CMD.token)?.transactionId, tx, 'the session really goes on');
    assert.deepEqual(errors, []);
  });

  it('a real end gives exactly one ended, confirmed by a second query', async () => {
    const tx = await watchRunningSession();
    const stoppedAt = Date.now();
    await stop(tx);
    await until(() => kinds().includes('ended'), 'ended');
    const endedAt = Date.parse(String((events.find((e) => e.event === 'ended')?.session as { endedAt?: string }).endedAt));
    assert.ok(endedAt >= stoppedAt && endedAt <= Date.now(), 'endedAt: when the end was seen, by the wall clock');
    const after = gets();
    await until(() => gets() >= after + 3, 'three more polls');
    assert.equal(kinds().filter((k) => k === 'ended').length, 1, `events: ${kinds().join()}`);
    assert.equal(events.find((e) => e.event === 'ended')?.session?.transactionId, tx);
    assert.equal(sim.session(CMD.token), undefined);
  });

  it('a confirming query that fails is reported as that error, not as ended', async () => {
    await watchRunningSession();
    // First the stray "not found", then the confirming query meets a 503.
    sim.inject({ target: 'get', kind: 'status', status: 404, times: 1 });
    sim.inject({ target: 'get', kind: 'status', status: 503, times: 1, body: '{"error":"unavailable"}' });
    await until(() => errors.length > 0, 'the confirming query failed');
    await until(() => sim.pendingFaults().length === 0, 'both faults answered');
    await delay(300);
    assert.equal(errors[0].code, 'HTTP');
    assert.match(errors[0].message, /503/);
    assert.ok(!kinds().includes('ended'), `events: ${kinds().join()}`);
    assert.equal(kinds().filter((k) => k === 'started').length, 1);
  });
});
