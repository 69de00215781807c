import assert from 'node:assert/strict';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { helper, load, Sink, send, until, loggedText, statusCalls, assertNoSecret, CLIENT_SECRET, runtimeSuite } from '../harness';

const START = { id: 'start', type: 'charging-start', service: 'svc', wires: [['startOut']] };
const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['progressOut']] };
const STOP = { id: 'stop', type: 'charging-stop', service: 'svc', wires: [['stopOut']] };
const SINKS = ['startOut', 'progressOut', 'stopOut', 'caught'].map((id) => ({ id, type: 'helper' }));
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

describe('nodes in a real Node-RED runtime, against the simulator', function () {
  const rt = runtimeSuite();

  it('chains start -> progress -> stop with no function node between', async () => {
    await load(rt.sim, [
      { ...START, wires: [['startOut', 'progress']] },
      { ...PROGRESS, wires: [['progressOut']] },
      { ...STOP },
      ...SINKS,
      CATCH,
    ]);
    const startOut = Sink.of('startOut');
    const progressOut = Sink.of('progressOut');
    const stopOut = Sink.of('stopOut');
    const caught = Sink.of('caught');

    send('start', { payload: { locationId: 'LOC-1', evseId: 7, token: 'RFID-1' } });
    const started = await startOut.next();
    assert.deepEqual(started.payload, { action: 'START', locationId: 'LOC-1', evseId: '7', token: 'RFID-1' });
    assert.equal(started.statusCode, 202);

    // The first progress answer comes at once: the session is still pending.
    const first = await progressOut.next();
    assert.equal((first.session as { pending: boolean }).pending, true);
    assert.equal((first.payload as Record<string, unknown>).transactionData, undefined);

    // Once the station has started, the record has a transactionId; feed the record to stop as it is.
    await until(() => (rt.sim.session('RFID-1')?.startedAt ?? Infinity) <= Date.now(), 'session start');
    send('progress', { payload: started.payload });
    const running = await progressOut.next();
    const record = running.payload as Record<string, unknown>;
    assert.equal(record.evseId, 7, 'record kept as the service returned it: evseId is a number');
    assert.equal(record.tokenId, 'RFID-1');
    const session = running.session as { transactionId: string; cdrId: string; pending: boolean };
    assert.equal(session.pending, false);
    assert.equal(session.transactionId, rt.sim.session('RFID-1')?.transactionId);
    assert.match(session.transactionId, /^TX-[0-9A-F]{12}$/);

    send('stop', running);
    const stopped = await stopOut.next();
    assert.deepEqual(stopped.payload, {
      action: 'STOP',
      locationId: 'LOC-1',
      evseId: '7',
      token: 'RFID-1',
      transactionId: session.transactionId,
      cdrId: session.cdrId,
    });
    const stopBody = JSON.parse(rt.sim.requests.filter((r) => r.method === 'POST').at(-1)?.body ?? '{}') as Record<string, unknown>;
    assert.equal(stopBody.evseId, '7', 'STOP sends evseId as a string');
    assert.equal(caught.messages.length, 0);
    await until(() => rt.sim.activeSessions() === 0, 'session ends after STOP', 2000);
  });

  it('sends msg.payload = null when there is no session, with a status that says so', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    const out = Sink.of('progressOut');
    send('progress', { payload: { token: 'NOBODY' } });
    const msg = await out.next();
    assert.equal(msg.payload, null);
    assert.equal(msg.session, null);
    assert.equal(Sink.of('caught').messages.length, 0);
    await until(() => statusCalls('progress').some((s) => String(s.text).startsWith('no session')), 'no-session status');
  });

  it('uses fields set in the node, typed inputs from msg and env', async () => {
    process.env.CHARGING_TEST_LOCATION = 'ENV-LOC';
    try {
    await load(rt.sim, [
      { ...START, locationId: 'CHARGING_TEST_LOCATION', locationIdType: 'env', evseId: 'site.evse', evseIdType: 'msg', token: 'NODE-TOKEN', tokenType: 'str' },
      ...SINKS,
      CATCH,
    ]);
    send('start', { site: { evse: '4' }, payload: { token: 'PAYLOAD-TOKEN', locationId: 'PAYLOAD-LOC' } });
    const out = await Sink.of('startOut').next();
    assert.deepEqual(out.payload, { action: 'START', locationId: 'ENV-LOC', evseId: '4', token: 'NODE-TOKEN' });
    } finally {
      delete process.env.CHARGING_TEST_LOCATION;
    }
  });

  for (const [missing, payload] of [
    ['locationId', { evseId: '1', token: 'T' }],
    ['evseId', { locationId: 'L', token: 'T' }],
    ['token', { locationId: 'L', evseId: '1' }],
  ] as const) {
    it(`fails before any request when ${missing} is missing, naming it, at a Catch node`, async () => {
      await load(rt.sim, [START, ...SINKS, CATCH]);
      send('start', { payload });
      const caught = await Sink.of('caught').next();
      const error = caught.error as { message: string; code: string };
      assert.match(error.message, new RegExp(`${missing} is required`));
      assert.equal(error.code, 'MISSING_FIELD');
      assert.equal(Sink.of('startOut').messages.length, 0);
      assert.equal(rt.sim.requests.length, 0, 'no request sent, not even for a token');
    });
  }

  it('stop without a transactionId looks the session up; a pending one gives NO_SESSION, naming why', async () => {
    await load(rt.sim, [{ ...START, wires: [['stop']] }, STOP, ...SINKS, CATCH]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'T' } }); // its output (no transactionId) goes straight to stop
    const caught = await Sink.of('caught').next();
    const error = caught.error as { message: string; code: string };
    assert.equal(error.code, 'NO_SESSION');
    assert.match(error.message, /Cannot stop yet: the session for token T has not started/);
    assert.equal(rt.sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).length, 1, 'only the START');
  });

  it('brings the status and the service text of a service error to Catch, nothing to the output', async () => {
    await load(rt.sim, [STOP, ...SINKS, CATCH]);
    send('stop', { payload: { locationId: 'L', evseId: '1', token: 'NOBODY', transactionId: 'TX-X' } });
    const caught = await Sink.of('caught').next();
    const error = caught.error as { message: string; code: string; source: { type: string } };
    assert.match(error.message, /STOP failed: the service answered 404: not_found: no active session for token NOBODY/);
    assert.equal(error.code, 'HTTP');
    assert.equal(error.source.type, 'charging-stop');
    assert.equal(Sink.of('stopOut').messages.length, 0);
    await until(() => statusCalls('stop').some((s) => s.fill === 'red' && s.text === 'error: HTTP 404'), 'red error status');
  });

  it('a wrong client secret gives an authentication error at Catch that does not contain the secret', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH], {}, { svc: { clientId: 'test-client', clientSecret: 'Wrong-Secret-123' } });
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    const error = caught.error as { message: string; code: string };
    assert.equal(error.code, 'AUTH');
    assert.match(error.message, /Authentication failed: .* answered 401/);
    assertNoSecret(JSON.stringify(caught), ['Wrong-Secret-123'], 'the caught message');
    assertNoSecret(loggedText(), ['Wrong-Secret-123'], 'the log');
  });

  it('makes one token request for 200 messages arriving at once across three nodes', async () => {
    await load(rt.sim, [
      PROGRESS,
      { ...PROGRESS, id: 'progress2' },
      { ...PROGRESS, id: 'progress3' },
      ...SINKS,
      CATCH,
    ]);
    const out = Sink.of('progressOut');
    for (let i = 0; i < 200; i++) send(['progress', 'progress2', 'progress3'][i % 3], { payload: { token: `T${i}` } });
    await out.nth(200, 10_000);
    assert.equal(rt.sim.counters.tokenRequests, 1);
    assert.equal(rt.sim.counters.progressQueries, 200);
  });

  it('never puts the secret or an access token in a msg, a log line, a status or an error', async () => {
    await load(rt.sim, [
      { ...START, wires: [['startOut', 'progress']] },
      { ...PROGRESS, wires: [['progressOut']] },
      STOP,
      ...SINKS,
      CATCH,
    ]);
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'RFID-9' } });
    await Sink.of('progressOut').next();
    rt.sim.revokeAllTokens(); // force a 401 and a second token
    send('progress', { payload: { token: 'RFID-9' } });
    await Promise.race([Sink.of('progressOut').nth(2), Sink.of('caught').next().then((m) => assert.fail(JSON.stringify(m.error)))]);
    rt.sim.inject({ target: 'post', kind: 'status', status: 500, body: 'internal error' });
    send('stop', { payload: { locationId: 'L', evseId: '1', token: 'RFID-9', transactionId: 'x' } });
    await Sink.of('caught').next();
    send('start', { payload: { locationId: 'L', evseId: '1', token: 42 } });
    await Sink.of('caught').nth(2);
    rt.sim.inject({ target: 'get', kind: 'reset', times: Infinity }); // an axios network error, which carries the request config
    send('progress', { payload: { token: 'RFID-9' } });
    const reset = await Sink.of('caught').nth(3);
    assert.match((reset.error as { message: string }).message, /the connection to .* failed \(ECONNRESET\)/);
    assert.doesNotMatch(JSON.stringify(reset), /Authorization|Bearer /i);

    const tokens = rt.sim.requests.map((r) => String(r.headers.authorization ?? '')).filter((a) => a.startsWith('Bearer ')).map((a) => a.slice(7));
    assert.ok(new Set(tokens).size >= 2, 'two tokens were in use');
    const secrets = [CLIENT_SECRET, Buffer.from(`test-client:${CLIENT_SECRET}`).toString('base64'), ...tokens];
    const everything = JSON.stringify({
      msgs: ['startOut', 'progressOut', 'stopOut', 'caught'].map((id) => Sink.of(id).messages),
      statuses: statusCalls(),
    });
    assertNoSecret(everything, secrets, 'messages or statuses');
    assertNoSecret(loggedText(), secrets, 'the log');
    assert.equal(Sink.of('caught').messages.length, 3);
  });

  it('clears its status on close', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    send('progress', { payload: { token: 'T' } });
    await Sink.of('progressOut').next();
    const node = helper.getNode('progress') as unknown as { status: (s: unknown) => void };
    const seen: unknown[] = [];
    node.status = (s: unknown) => seen.push(s); // the helper restores its own spies before closing nodes
    await helper.unload();
    assert.deepEqual(seen, [{}]);
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]); // afterEach unloads again
  });
});
