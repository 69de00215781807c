/**
 * Max requests per second (issue 17.3), measured where the operator measures
 * it: at the server, by arrival time.
 */
import assert from 'node:assert/strict';
import { ServiceClient } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { startCommand } from '../../../nodes/lib/session/commands';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { busiestSecond, clientFor, startSimulator, until } from '../../harness';

describe('Max requests per second: a request budget per configuration (simulator over HTTP)', () => {
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  afterEach(async () => {
    await client?.close();
    await sim?.stop();
  });

  it('40 queries at once with a limit of 10/s: no 1 s window at the server holds more than 10 + 1, and all are answered', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { maxRequestsPerSec: 10, timeoutMs: 5000 });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => client.getProgress(`RB-${i}`)));
    assert.equal(answers.length, 40);
    const most = busiestSecond(sim);
    assert.ok(most <= 11, `busiest second held ${most} requests`);
    assert.ok(most >= 9, `the budget is used, not starved (${most})`);
  });

  it('a decimal limit (2.5/s) is kept as well', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { maxRequestsPerSec: 2.5, timeoutMs: 5000 });
    await Promise.all(Array.from({ length: 8 }, (_, i) => client.getProgress(`RD-${i}`)));
    assert.ok(busiestSecond(sim) <= 3, `busiest second held ${busiestSecond(sim)}`);
  });

  it('a START arriving while 1 000 watch polls wait is sent next, before every poll still queued', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { maxRequestsPerSec: 20, timeoutMs: 5000 });
    await client.getProgress('warm-up'); // token fetched, budget running
    const polls = new AbortController();
    const pending = Array.from({ length: 1000 }, (_, i) => client.getProgress(`POLL-${i}`, { signal: polls.signal, priority: 'poll' }).catch((e: ChargingError) => e));
    await new Promise((r) => setTimeout(r, 300)); // a few polls out, the rest queued
    const before = sim.requests.filter((r) => r.method === 'GET').length;
    await client.sendCommand(startCommand({ locationId: 'L', evseId: '1', token: 'RB-START' }));
    const getsBeforeStart = sim.requests.filter((r) => r.method === 'GET').length - before;
    polls.abort();
    const ends = await Promise.all(pending);
    assert.ok(getsBeforeStart <= 1, `${getsBeforeStart} polls went before the START`);
    assert.ok(ends.filter((e) => e instanceof ChargingError && e.code === 'CLOSED').length > 900, 'the queued polls were still waiting, and left the queue on abort');
  });

  it('a 429 halves the rate used; good answers climb back to the limit', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { maxRequestsPerSec: 20, timeoutMs: 5000, retry: { baseDelayMs: 10, maxDelayMs: 20 } });
    await client.getProgress('a');
    assert.deepEqual(client.requestRate, { limit: 20, current: 20 });
    sim.inject({ target: 'get', kind: 'status', status: 429, times: 1 });
    await client.getProgress('b'); // 429, then retried
    await until(() => client.requestRate.current < 20, 'the rate to drop', 2000);
    const lowered = client.requestRate.current;
    assert.ok(lowered <= 12, `lowered to ${lowered}`);
    for (let i = 0; i < 12; i++) await client.getProgress(`c-${i}`);
    assert.equal(client.requestRate.current, 20);
  });

  it('no limit by default: nothing is spaced', async () => {
    sim = await startSimulator();
    client = clientFor(sim, { timeoutMs: 5000 });
    await Promise.all(Array.from({ length: 30 }, (_, i) => client.getProgress(`NL-${i}`)));
    assert.ok(busiestSecond(sim) >= 30);
    assert.deepEqual(client.requestRate, { limit: 0, current: 0 });
  });
});
