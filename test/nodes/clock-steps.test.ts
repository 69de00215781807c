/**
 * Every deadline holds whatever the wall clock does (issue 16.4): the clock is
 * stepped by an hour while real timers run, as NTP does after a Raspberry Pi
 * without a real-time clock boots, or a VM resumes.
 */
import assert from 'node:assert/strict';
import sinon from 'sinon';
import { ChargingError } from '../../nodes/lib/errors';
import { load, Sink, send, startSimulator, runtimeSuite, clientFor } from '../harness';

const SINKS = ['out', 'out2', 'caught'].map((id) => ({ id, type: 'helper' }));
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const HOUR = 3_600_000;
const wallNow = Date.now.bind(Date);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How far Date.now() is off, while the stub below is in place; timers are untouched. */
let offset = 0;
const stepClock = (ms: number) => void (offset = ms);

describe('Deadlines on a monotonic clock: the wall clock stepped by an hour', function () {
  // The simulator keeps the real time: only the runtime's clock is stepped.
  const rt = runtimeSuite({ now: wallNow, startDelayMs: 60_000 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  // In place before the nodes and clients are made, so that code which keeps a reference to Date.now sees the steps too.
  let stub: sinon.SinonStub;
  beforeEach(() => {
    offset = 0;
    stub = sinon.stub(Date, 'now').callsFake(() => wallNow() + offset);
  });
  afterEach(() => stub.restore());

  it('clock back 1 h: a START to a hanging service (Timeout 2 s) still gets its answer at the deadline, not an hour later', async () => {
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wires: [['out']] }, ...SINKS, CATCH], { timeout: 2 });
    rt.sim.inject({ target: 'post', kind: 'hang', times: 1 });
    const began = performance.now();
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'CLK-1' } });
    await pause(300); // the exchange is under way, its deadline set
    stepClock(-HOUR);
    const caught = await Sink.of('caught').next(8000);
    assert.equal((caught.error as { code: string }).code, 'OUTCOME_UNKNOWN');
    assert.ok(performance.now() - began < 8000);
  });

  it('clock back 1 h: a 3 s "wait until started" still ends in NOT_CONFIRMED after about 3 s', async () => {
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 3, wires: [['out']] }, ...SINKS, CATCH]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'CLK-2' } });
    await pause(500); // accepted, the wait under way
    stepClock(-HOUR);
    const caught = await Sink.of('caught').next(10_000);
    assert.equal((caught.error as { code: string }).code, 'NOT_CONFIRMED');
  });

  it('clock forward 1 h during a 20 s wait: the session confirmed at ~2 s is reported started, no false NOT_CONFIRMED', async () => {
    await rt.sim.stop();
    rt.sim = await startSimulator({ now: wallNow, startDelayMs: 2000 });
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 20, wires: [['out']] }, ...SINKS, CATCH]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'CLK-3' } });
    await pause(300);
    stepClock(HOUR);
    const msg = await Sink.of('out').next(10_000);
    assert.equal(msg.outcome, 'started');
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('clock forward 2 h: the cached access token is not taken for expired (no new token request)', async () => {
    const client = clientFor(rt.sim, { timeoutMs: 2000 });
    try {
      await client.getProgress('CLK-4');
      stepClock(2 * HOUR);
      await client.getProgress('CLK-4');
      assert.equal(rt.sim.counters.tokenRequests, 1);
    } finally {
      await client.close();
    }
  });

  it('clock back 1 h: the back-off after a failed query still ends (the retried query succeeds)', async () => {
    const client = clientFor(rt.sim, { timeoutMs: 2000, retry: { baseDelayMs: 200, maxDelayMs: 400 } });
    try {
      await client.getProgress('warm');
      rt.sim.inject({ target: 'get', kind: 'status', status: 503, times: 1 });
      const answer = client.getProgress('CLK-5').catch((e: ChargingError) => e);
      await pause(50); // the 503 is in, the back-off pause under way
      stepClock(-HOUR);
      const res = await answer;
      assert.ok(!(res instanceof Error), `answered: ${String(res)}`);
    } finally {
      await client.close();
    }
  });

});
