import assert from 'node:assert/strict';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { helper, load, Sink, send, startSimulator, delay, until, loggedText, runtimeSuite } from '../harness';

const SINKS = ['out', 'out2', 'out3', 'caught'].map((id) => ({ id, type: 'helper' }));
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const WATCH = { id: 'watcher1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, wires: [['out']] };

describe('watching, waiting and looking up sessions (runtime + simulator)', () => {
  const rt = runtimeSuite({ startDelayMs: 150, stopDelayMs: 150 }, { chargingSession: { minPollIntervalSec: 0.1 } });

  async function startAndStop(token: string): Promise<void> {
    const base = { locationId: 'L', evseId: '1', token };
    await fetch(`${rt.sim.authUrl}/v1/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from('test-client:S3cr3t-Value-That-Must-Never-Leak').toString('base64')}`, Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    })
      .then((r) => r.json() as Promise<{ access_token: string }>)
      .then(async ({ access_token }) => {
        const post = (body: unknown) =>
          fetch(`${rt.sim.baseUrl}${SESSIONS_PATH}`, { method: 'POST', headers: { Authorization: `Bearer ${access_token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
        await post({ action: 'START', ...base });
        await until(() => (rt.sim.session(token)?.startedAt ?? Infinity) + 500 <= Date.now(), 'the session running for half a second');
        const tx = rt.sim.session(token)?.transactionId;
        await post({ action: 'STOP', ...base, transactionId: tx });
      });
  }

  it('watch mode: a token added by msg.topic "watch" yields pending, started, updated and ended events', async () => {
    await load(rt.sim, [WATCH, ...SINKS, CATCH]);
    send('watcher1', { topic: 'watch', payload: 'W-1' });
    const out = Sink.of('out');
    await startAndStop('W-1');
    await until(() => out.messages.some((m) => m.event === 'ended'), 'ended event', 5000);
    // Order: [pending] started updated… ended (pending only if a poll fell before the start).
    const events = out.messages.map((m) => m.event).filter((e, i, a) => e !== a[i - 1]);
    assert.deepEqual(events.filter((e) => e !== 'pending'), ['started', 'updated', 'ended']);
    assert.ok(events.indexOf('pending') <= 0);
    const started = out.messages.find((m) => m.event === 'started') as Record<string, unknown>;
    assert.equal(started.topic, 'W-1');
    assert.equal((started.payload as { tokenId: string }).tokenId, 'W-1', 'the record as the service returned it');
    assert.equal((started.session as { transactionId: string }).transactionId, (out.messages.at(-1)?.session as { transactionId: string }).transactionId);
    assert.match((started.session as { transactionId: string }).transactionId, /^TX-/);
    const updated = out.messages.filter((m) => m.event === 'updated').at(-1) as Record<string, unknown>;
    assert.equal(typeof (updated.session as { energyKWh: number }).energyKWh, 'number');
    assert.ok((updated.session as { meterEnd: number }).meterEnd > (updated.session as { meterStart: number }).meterStart, 'the meter advanced');
    assert.equal((out.messages.at(-1) as Record<string, unknown>).payload, null);
    assert.equal(Sink.of('caught').messages.length, 0);
  });

  /** A START or STOP sent to the simulator directly, as another system would. */
  async function command(body: Record<string, unknown>): Promise<void> {
    const basic = Buffer.from('test-client:S3cr3t-Value-That-Must-Never-Leak').toString('base64');
    const tokenRes = await fetch(`${rt.sim.authUrl}/v1/token`, { method: 'POST', headers: { Authorization: `Basic ${basic}`, Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials' });
    const { access_token } = (await tokenRes.json()) as { access_token: string };
    const res = await fetch(`${rt.sim.baseUrl}${SESSIONS_PATH}`, { method: 'POST', headers: { Authorization: `Bearer ${access_token}`, Accept: 'application/json', 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 202, `${String(body.action)} accepted`);
  }

  it('watch mode: a "not found" blip or a gateway\'s route-404 while a session runs ends nothing; the real end is reported once', async () => {
    await load(rt.sim, [{ ...WATCH, watchTokens: 'B-1' }, ...SINKS, CATCH]);
    const out = Sink.of('out');
    const base = { locationId: 'L', evseId: '1', token: 'B-1' };
    await command({ action: 'START', ...base });
    await until(() => out.messages.some((m) => m.event === 'started'), 'started', 5000);
    rt.sim.inject({ target: 'get', kind: 'status', status: 404, times: 1 }); // the service's own "no session", once
    await delay(1500);
    rt.sim.inject({ target: 'get', kind: 'route-404', times: 3 }); // the gateway lost its route for three polls
    await delay(1500);
    assert.deepEqual(out.messages.filter((m) => m.event === 'ended' || m.event === 'started').map((m) => m.event), ['started']);
    assert.equal(rt.sim.pendingFaults().length, 0, 'both blips were met');
    const caught = Sink.of('caught').messages.map((m) => (m.error as { code: string }).code);
    assert.deepEqual([...new Set(caught)], ['HTTP'], 'the gateway 404 is an HTTP error');
    await command({ action: 'STOP', ...base, transactionId: rt.sim.session('B-1')?.transactionId });
    await until(() => out.messages.some((m) => m.event === 'ended'), 'ended', 5000);
    await delay(600);
    assert.equal(out.messages.filter((m) => m.event === 'ended').length, 1);
  });

  it('watch mode with tokens set in the node and split outputs: started on 1, updates on 2, ended on 3', async () => {
    await load(rt.sim, [{ ...WATCH, watchTokens: 'S-1, S-2', splitOutputs: true, outputs: 3, wires: [['out'], ['out2'], ['out3']] }, ...SINKS, CATCH]);
    await startAndStop('S-2');
    await until(() => Sink.of('out3').messages.length > 0, 'ended on output 3', 5000);
    assert.ok(Sink.of('out').messages.every((m) => m.event === 'pending' || m.event === 'started'));
    assert.ok(Sink.of('out2').messages.every((m) => m.event === 'updated'));
    assert.deepEqual(Sink.of('out3').messages.map((m) => [m.event, m.topic]), [['ended', 'S-2']]);
    const tokensPolled = new Set(rt.sim.requests.filter((r) => r.method === 'GET').map((r) => r.query.token));
    assert.deepEqual([...tokensPolled].sort(), ['S-1', 'S-2']);
  });

  it('unwatch stops polling that token; closing the node stops all polling', async () => {
    await load(rt.sim, [{ ...WATCH, watchTokens: 'U-1 U-2' }, ...SINKS, CATCH]);
    await delay(500);
    send('watcher1', { topic: 'unwatch', payload: ['U-1'] });
    await delay(100);
    const mark = rt.sim.requests.length;
    await delay(600);
    const later = rt.sim.requests.slice(mark).filter((r) => r.method === 'GET').map((r) => r.query.token);
    assert.ok(later.length > 0 && later.every((t) => t === 'U-2'), later.join());
    await helper.unload();
    const sent = rt.sim.requests.length;
    await delay(600);
    assert.equal(rt.sim.requests.length, sent, 'no poll after close');
    await load(rt.sim, [WATCH, ...SINKS, CATCH]);
  });

  it('tokens added by message survive a redeploy of the node (flow context)', async () => {
    await load(rt.sim, [WATCH, ...SINKS, CATCH]);
    send('watcher1', { topic: 'watch', payload: ['KEEP-1', 'KEEP-2'] });
    send('watcher1', { topic: 'unwatch', payload: 'KEEP-2' });
    await delay(300);
    // Stop and start the flows as a "restart flows" deploy does (helper.unload would also wipe all context).
    const runtime = (helper as unknown as { _redNodes: { stopFlows(): Promise<void>; startFlows(): Promise<void> } })._redNodes;
    await runtime.stopFlows();
    await runtime.startFlows();
    const mark = rt.sim.requests.length;
    await delay(700);
    const polled = new Set(rt.sim.requests.slice(mark).filter((r) => r.method === 'GET').map((r) => r.query.token));
    assert.deepEqual([...polled], ['KEEP-1']);
  });

  it('the interval has a floor from settings, with a warning', async () => {
    helper.settings({ chargingSession: { minPollIntervalSec: 30 } } as Record<string, unknown>);
    try {
      await load(rt.sim, [{ ...WATCH, watchTokens: 'F-1', interval: 1 }, ...SINKS, CATCH]);
      await delay(300);
      assert.match(loggedText(), /Poll interval raised from 1 s to the minimum of 30 s/);
    } finally {
      helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
    }
  });

  it('start with "wait until started" sends once the session has a transactionId, with msg.session', async () => {
    await load(rt.sim, [{ id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 10, wires: [['out']] }, ...SINKS, CATCH]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'WS-1' } });
    const msg = await Sink.of('out').next(8000);
    assert.equal(msg.outcome, 'started');
    assert.ok((msg.session as { transactionId: string }).transactionId);
    assert.deepEqual(msg.payload, { action: 'START', locationId: 'L', evseId: '1', token: 'WS-1' });
  });

  it('start wait that runs out: to the second output with outcome "not confirmed", or a NOT_CONFIRMED error', async () => {
    await rt.sim.stop();
    rt.sim = await startSimulator({ startDelayMs: 60_000 });
    await load(rt.sim, [
      { id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 1, timeoutOutput: true, outputs: 2, wires: [['out'], ['out2']] },
      { id: 'start2', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 1, wires: [['out3']] },
      ...SINKS,
      CATCH,
    ]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'NC-1' } });
    send('start2', { payload: { locationId: 'L', evseId: '2', token: 'NC-2' } });
    // nth(1), not next(): both run out at the same second, and the error may be caught before the output is awaited.
    const timedOut = await Sink.of('out2').nth(1, 5000);
    assert.equal(timedOut.outcome, 'not confirmed');
    const caught = await Sink.of('caught').nth(1, 5000);
    assert.equal((caught.error as { code: string }).code, 'NOT_CONFIRMED');
    assert.match((caught.error as { message: string }).message, /START was not confirmed within 1 s/);
    assert.equal(Sink.of('out').messages.length + Sink.of('out3').messages.length, 0);
  });

  it('stop with only a token looks the session up, stops it, and with "wait" reports it ended', async () => {
    await load(rt.sim, [
      { id: 'start', type: 'charging-start', service: 'svc', wait: true, waitTimeout: 10, wires: [['out']] },
      { id: 'stop', type: 'charging-stop', service: 'svc', wait: true, waitTimeout: 10, wires: [['out2']] },
      ...SINKS,
      CATCH,
    ]);
    send('start', { payload: { locationId: 'L', evseId: '5', token: 'LK-1' } });
    const started = await Sink.of('out').next(8000);
    send('stop', { payload: { token: 'LK-1' } });
    const stopped = await Sink.of('out2').next(8000);
    assert.equal(stopped.outcome, 'ended');
    assert.deepEqual(stopped.payload, {
      action: 'STOP',
      locationId: 'L',
      evseId: '5',
      token: 'LK-1',
      transactionId: (started.session as { transactionId: string }).transactionId,
      cdrId: (started.session as { cdrId: string }).cdrId,
    });
    assert.equal(rt.sim.counters.stops, 1);
  });

  it('stop with only a token and no session: NO_SESSION at Catch, no STOP sent', async () => {
    await load(rt.sim, [{ id: 'stop', type: 'charging-stop', service: 'svc', wires: [['out']] }, ...SINKS, CATCH]);
    send('stop', { payload: { token: 'NOBODY' } });
    const caught = await Sink.of('caught').next();
    assert.equal((caught.error as { code: string }).code, 'NO_SESSION');
    assert.match((caught.error as { message: string }).message, /Nothing to stop: there is no session for token NOBODY/);
    assert.equal(rt.sim.counters.stops, 0);
  });
});
