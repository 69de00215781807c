import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureStop, EnsureStopOptions, notStopped } from '../../../nodes/lib/session/ensure-stop';
import { startCommand, stopCommand } from '../../../nodes/lib/session/commands';
import type { ActionResult } from '../../../nodes/lib/client/answers';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { ChargingError } from '../../../nodes/lib/errors';
import { clientFor, startSimulator, until } from '../../harness';

// The loop alone (no Node-RED), against the simulator over HTTP.
describe('ensureStop (no Node-RED, against the simulator)', function () {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 0 });
    client = clientFor(sim);
  });
  afterEach(async () => {
    await client.close();
    await sim.stop();
  });

  async function session(): Promise<ReturnType<typeof stopCommand>> {
    await client.sendCommand(startCommand({ locationId: 'L', evseId: '1', token: 'T' }));
    const tx = sim.session('T')?.transactionId as string;
    return stopCommand({ locationId: 'L', evseId: '1', token: 'T', transactionId: tx });
  }

  function options(extra: Partial<EnsureStopOptions<ActionResult>>): EnsureStopOptions<ActionResult> {
    return {
      attempts: 3,
      timeoutMs: 1_000,
      intervalMs: 200,
      send: (c) => client.sendCommand(c),
      poll: async (t, signal) => (await client.getProgress(t, { signal })).record,
      sleep: (ms, signal) => sleep(ms, undefined, { signal }),
      ...extra,
    };
  }

  it('reports each attempt as n of attempts, and ends after the STOP the station did not ignore', async () => {
    const cmd = await session();
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 2 });
    const attempts: string[] = [];
    const result = await ensureStop(cmd, options({ onAttempt: (n, of) => attempts.push(`${n}/${of}`) }));
    assert.equal(result.outcome, 'ended');
    assert.equal(result.stopAttempts, 3);
    assert.deepEqual(attempts, ['1/3', '2/3', '3/3']);
    assert.equal(result.accepted?.statusCode, 202);
    assert.equal(sim.arrivals('STOP', cmd.transactionId as string), 3);
  });

  it('a STOP of a session that is gone already (404) is success after a query, with one STOP', async () => {
    const cmd = stopCommand({ locationId: 'L', evseId: '1', token: 'NOBODY', transactionId: 'TX-GONE' });
    const result = await ensureStop(cmd, options({}));
    assert.equal(result.outcome, 'ended');
    assert.equal(result.stopAttempts, 1);
    assert.equal(result.record, null);
  });

  it('not stopped: the one line says how many STOPs and what progress last showed', async () => {
    const cmd = await session();
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 5 });
    const result = await ensureStop(cmd, options({ attempts: 1 }));
    assert.equal(result.outcome, 'not stopped');
    const err = notStopped(result);
    assert.equal(err.code, 'NOT_STOPPED');
    assert.match(err.message, new RegExp(`^The session did not end after 1 STOP \\(each followed by a wait of 1 s\\): progress still showed it active \\(transaction ${cmd.transactionId as string}\\) at \\d\\d:\\d\\d:\\d\\d UTC, \\d+(\\.\\d)? s after the last STOP$`));
  });

  it('the session ends just after the STOP, then every query gets 503: no second STOP, NOT_CONFIRMED naming what was last seen and when, never "still active"', async () => {
    sim.stop().catch(() => undefined);
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 500 });
    await client.close();
    client = clientFor(sim, { retry: { getAttempts: 1 } });
    const cmd = await session();
    let reads = 0;
    // The first read after the STOP shows the session still shutting down; from then on the service cannot be read.
    const result = await ensureStop(
      cmd,
      options({
        attempts: 3,
        poll: async (t, signal) => {
          const record = (await client.getProgress(t, { signal })).record;
          if (++reads === 1) sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
          return record;
        },
      }),
    );
    assert.equal(reads, 1, 'one read worked, before the 503s');
    assert.equal(result.outcome, 'not confirmed');
    assert.equal(result.stopAttempts, 1);
    assert.equal(sim.arrivals('STOP', cmd.transactionId as string), 1, 'no STOP without evidence that the session goes on');
    const err = notStopped(result);
    assert.equal(err.code, 'NOT_CONFIRMED');
    assert.doesNotMatch(err.message, /still active/);
    assert.match(err.message, /progress could not be read after the STOP for 1 s \(last query: .*503.*\); last seen: the session active \(transaction [^)]+\) at \d\d:\d\d:\d\d UTC, [\d.]+ s after the STOP\. It was not sent again/);
  });

  it('every query fails after an accepted STOP: NOT_CONFIRMED, "nothing since the STOP", one STOP', async () => {
    await client.close();
    client = clientFor(sim, { retry: { getAttempts: 1 } });
    const cmd = await session();
    sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
    const result = await ensureStop(cmd, options({ attempts: 3 }));
    assert.equal(result.outcome, 'not confirmed');
    assert.equal(sim.arrivals('STOP', cmd.transactionId as string), 1);
    assert.match(notStopped(result).message, /last seen: nothing since the STOP/);
  });

  it('a STOP whose answer was lost, and progress unreadable after it: its OUTCOME_UNKNOWN stands, saying progress could not tell; no second STOP', async () => {
    await client.close();
    client = clientFor(sim, { retry: { getAttempts: 1 } });
    const cmd = await session();
    sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
    sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
    await assert.rejects(ensureStop(cmd, options({ attempts: 3 })), (err: unknown) => err instanceof ChargingError && err.code === 'OUTCOME_UNKNOWN' && /progress could not be read after the STOP/.test(err.message));
    assert.equal(sim.arrivals('STOP', cmd.transactionId as string), 1);
  });

  it('an abort (the node closing) ends the loop at once while the client stays open: no further STOP', async () => {
    const cmd = await session();
    sim.inject({ target: 'post', kind: 'ignore-stop', times: 5 });
    const close = new AbortController();
    const done = ensureStop(cmd, options({ attempts: 5, timeoutMs: 1_500, signal: close.signal }));
    await until(() => sim.arrivals('STOP', cmd.transactionId as string) === 1, 'the first STOP');
    close.abort();
    await assert.rejects(done, (err: unknown) => err instanceof ChargingError && err.code === 'CLOSED');
    await sleep(2_000); // longer than the wait after which the next STOP would have gone
    assert.equal(sim.arrivals('STOP', cmd.transactionId as string), 1);
  });
});
