import assert from 'node:assert/strict';
import { load, Sink, send, until, runtimeSuite } from '../harness';

// Issue 16.5: each poll of a wait gets only what is left of the wait, so a service that hangs
// after the 202 cannot stretch "wait at most 3 s" to the 30 s message budget.
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'late', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

describe('a wait bounded by its own limit when progress hangs', function () {
  const rt = runtimeSuite({ startDelayMs: 0 });

  it('charging-start, wait 3 s, progress GETs hang: NOT_CONFIRMED at Catch within the wait plus a margin', async () => {
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 3, wires: [['out']] }, ...SINKS, CATCH], { timeout: 30 });
    rt.sim.inject({ target: 'get', kind: 'hang', times: Infinity });
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'T' } });
    // Generous bound: 3 s wait + margin; without the bound the first poll alone holds it for 30 s.
    const caught = await Sink.of('caught').next(8_000);
    assert.equal((caught.error as { code: string }).code, 'NOT_CONFIRMED');
    assert.equal(Sink.of('out').messages.length, 0);
  });

  it('charging-stop, wait 3 s with a second output, progress GETs hang: "not confirmed" on output 2 within the wait plus a margin', async () => {
    const stop = { id: 'stop', type: 'charging-stop', service: 'svc', wait: true, waitTimeout: 3, timeoutOutput: true, wires: [['out'], ['late']] };
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] }, { id: 'started', type: 'helper' }, stop, ...SINKS, CATCH], { timeout: 30 });
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'T' } });
    await Sink.of('started').next();
    await until(() => typeof rt.sim.session('T')?.transactionId === 'string', 'transaction');
    rt.sim.inject({ target: 'get', kind: 'hang', times: Infinity });
    const transactionId = rt.sim.session('T')?.transactionId as string;
    // The station ignores the STOP, so only progress could confirm it, and progress hangs.
    rt.sim.inject({ target: 'post', kind: 'ignore-stop' });
    send('stop', { payload: { locationId: 'L', evseId: '1', token: 'T', transactionId } });
    const late = await Sink.of('late').next(8_000);
    assert.equal(late.outcome, 'not confirmed');
    assert.equal(Sink.of('caught').messages.length, 0);
  });
});
