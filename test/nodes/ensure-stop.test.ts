import assert from 'node:assert/strict';
import { helper, load, Sink, send, until, delay, runtimeSuite, FlowNode } from '../harness';

// Issue 17.1 "Make sure it ends", through the real runtime against the simulator's station that ignores STOPs.
const START = { id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] };
const SINKS = [{ id: 'started', type: 'helper' }, { id: 'out', type: 'helper' }, { id: 'late', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

function stopNode(extra: Record<string, unknown>): FlowNode {
  return { id: 'stop', type: 'charging-stop', service: 'svc', wait: true, ensure: true, waitTimeout: 1, wires: [['out'], ['late']], ...extra };
}

describe('charging-stop "Make sure it ends" (ensure)', function () {
  const rt = runtimeSuite({ startDelayMs: 0 });

  /** Loads the flow, starts a session on token T and returns its transactionId. */
  async function running(stop: FlowNode): Promise<string> {
    await load(rt.sim, [START, stop, ...SINKS, CATCH]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'T' } });
    await Sink.of('started').next();
    await until(() => typeof rt.sim.session('T')?.transactionId === 'string', 'transaction');
    return rt.sim.session('T')?.transactionId as string;
  }
  const stopMsg = (transactionId: string) => ({ payload: { locationId: 'L', evseId: '1', token: 'T', transactionId } });

  it('a station that ignores one STOP: a second STOP ends it, outcome "ended", stopAttempts 2, exactly 2 STOPs arrived', async () => {
    const tx = await running(stopNode({ ensureAttempts: 3 }));
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 1 });
    send('stop', stopMsg(tx));
    const msg = await Sink.of('out').next(10_000);
    assert.equal(msg.outcome, 'ended');
    assert.equal(msg.stopAttempts, 2);
    assert.equal((msg.session as { transactionId: string }).transactionId, tx, 'the session as last seen');
    assert.equal(rt.sim.arrivals('STOP', tx), 2);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('a station that ignores every STOP: NOT_STOPPED at Catch after ensureAttempts 2, exactly 2 STOPs arrived', async () => {
    const tx = await running(stopNode({ ensureAttempts: 2 }));
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 5 });
    send('stop', stopMsg(tx));
    const caught = await Sink.of('caught').next(10_000);
    const error = caught.error as { code: string; message: string };
    assert.equal(error.code, 'NOT_STOPPED');
    assert.match(error.message, /after 2 STOPs.*still showed it active/);
    assert.equal(rt.sim.arrivals('STOP', tx), 2);
    assert.equal(Sink.of('out').messages.length, 0);
  });

  it('with the second output: outcome "not stopped" on output 2, exactly 2 STOPs arrived', async () => {
    const tx = await running(stopNode({ ensureAttempts: 2, timeoutOutput: true, outputs: 2 }));
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 5 });
    send('stop', stopMsg(tx));
    const late = await Sink.of('late').next(10_000);
    assert.equal(late.outcome, 'not stopped');
    assert.equal(late.stopAttempts, 2);
    assert.equal(rt.sim.arrivals('STOP', tx), 2);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('the service answers 503 to every query after an accepted STOP: NOT_CONFIRMED at Catch, exactly 1 STOP, never "still active"', async () => {
    const tx = await running(stopNode({ ensureAttempts: 3 }));
    rt.sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
    send('stop', stopMsg(tx));
    const caught = await Sink.of('caught').next(10_000);
    const error = caught.error as { code: string; message: string };
    assert.equal(error.code, 'NOT_CONFIRMED');
    assert.doesNotMatch(error.message, /still active/);
    assert.match(error.message, /progress could not be read after the STOP/);
    assert.equal(rt.sim.arrivals('STOP', tx), 1);
    assert.equal(Sink.of('out').messages.length, 0);
  });

  it('the same with the second output: outcome "not confirmed" on output 2, exactly 1 STOP', async () => {
    const tx = await running(stopNode({ ensureAttempts: 3, timeoutOutput: true, outputs: 2 }));
    rt.sim.inject({ target: 'get', kind: 'status', status: 503, times: Infinity });
    send('stop', stopMsg(tx));
    const late = await Sink.of('late').next(10_000);
    assert.equal(late.outcome, 'not confirmed');
    assert.equal(late.stopAttempts, 1);
    assert.equal(rt.sim.arrivals('STOP', tx), 1);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('a STOP whose answer is lost after the station acted (OUTCOME_UNKNOWN) is resolved by a query: ended, no second STOP', async () => {
    const tx = await running(stopNode({ ensureAttempts: 3 }));
    rt.sim.inject({ target: 'post', kind: 'status', status: 502, afterProcessing: true });
    send('stop', stopMsg(tx));
    const msg = await Sink.of('out').next(10_000);
    assert.equal(msg.outcome, 'ended');
    assert.equal(msg.stopAttempts, 1);
    assert.equal(rt.sim.arrivals('STOP', tx), 1);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  it('closing the node during the loop sends no further STOP', async () => {
    const tx = await running(stopNode({ ensureAttempts: 5, waitTimeout: 2 }));
    rt.sim.inject({ target: 'post', kind: 'ignore-stop', times: 5 });
    send('stop', stopMsg(tx));
    await until(() => rt.sim.arrivals('STOP', tx) === 1, 'the first STOP');
    await helper.unload();
    await delay(3_000); // longer than the wait after which the next STOP would have gone
    assert.equal(rt.sim.arrivals('STOP', tx), 1);
  });
});
