/**
 * Hostile servers and payloads, as the user sees them: through the nodes in a
 * real Node-RED runtime (node-red-node-test-helper) against the simulator.
 * Every message is answered (output or Catch), nothing secret reaches a msg,
 * and no failure becomes an unhandled rejection.
 */
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { helper, load, Sink, send, until, loggedText, CLIENT_SECRET, runtimeSuite } from '../harness';
import { assertNoPart } from '../lib/client/hostile.test';

const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out', 'out2']] };
const START = { id: 'start', type: 'charging-start', service: 'svc', wires: [['out']] };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'out2', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

/** A payload nested `depth` levels. */
function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { x: v };
  return v;
}

describe('hostile servers and payloads, through the nodes in a real runtime', function () {
  const rt = runtimeSuite();

  /** START through the start node; resolves once its output has passed and the session has a transaction. */
  async function startSession(token = 'RFID-1'): Promise<void> {
    const out = Sink.of('out');
    const seen = out.messages.length;
    send('start', { payload: { locationId: 'LOC-1', evseId: '1', token } });
    await out.nth(seen + 1);
    await until(() => (rt.sim.session(token)?.startedAt ?? Infinity) <= Date.now(), 'session start');
  }

  it('a 1 MiB JSON 404 full of "route " is classified without stalling the runtime (event loop never held 100 ms)', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    // Every "route " started a scan to the end of the body for "not found": quadratic, minutes for 1 MiB.
    const body = JSON.stringify({ message: 'route '.repeat(174_000) });
    rt.sim.inject({ target: 'get', kind: 'status', status: 404, body, headers: { 'content-type': 'application/json' } });
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    send('progress', { payload: { token: 'RFID-1' } });
    const out = await Sink.of('out').next();
    delay.disable();
    assert.equal(out.payload, null, "the service's own JSON without a gateway phrase: no session");
    const worstMs = delay.max / 1e6;
    assert.ok(worstMs < 100, `the event loop was held ${worstMs.toFixed(0)} ms`);
  });

  it('a record nested 5000 deep, wired to two nodes: BAD_RESPONSE at Catch, nothing on the outputs, the node still works', async () => {
    await load(rt.sim, [START, PROGRESS, ...SINKS, CATCH]);
    await startSession();
    rt.sim.inject({ target: 'get', kind: 'deep', depth: 5000 });
    send('progress', { payload: { token: 'RFID-1' } });
    const caught = await Sink.of('caught').next();
    assert.equal((caught.error as { code: string }).code, 'BAD_RESPONSE');
    assert.match((caught.error as { message: string }).message, /nested deeper than 64 levels/);
    assert.equal(caught.payload && typeof caught.payload === 'object' && 'extra' in caught.payload, false, 'the deep record is not in the error message either');
    send('progress', { payload: { token: 'RFID-1' } });
    const ok = await Sink.of('out2').next();
    assert.equal((ok.payload as { tokenId: string }).tokenId, 'RFID-1');
  });

  it('an input message Node-RED cannot clone (nested 5000 deep) is reported in the log, not thrown: no crash, the node still works', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    send('progress', { payload: { token: 'nobody' }, extra: nested(5000) });
    await until(() => /could not be passed to Catch/.test(loggedText()), 'the report in the log');
    assert.match(loggedText(), /Could not pass the result on \(Maximum call stack size exceeded\); nothing was sent/);
    send('progress', { payload: { token: 'nobody' } });
    const ok = await Sink.of('out').next();
    assert.equal(ok.payload, null);
  });

  it('eight dripping answers do not hold the configuration: each is cut at the timeout and retried, and another node is served meanwhile', async () => {
    await load(rt.sim, [START, PROGRESS, { id: 'other', type: 'charging-progress', service: 'svc', wires: [['out3']] }, { id: 'out3', type: 'helper' }, ...SINKS, CATCH], { timeout: 1, maxInFlight: 2 });
    await startSession();
    rt.sim.inject({ target: 'get', kind: 'drip', delayMs: 400, times: 8 });
    for (let i = 0; i < 8; i++) send('progress', { payload: { token: 'RFID-1' } });
    send('other', { payload: { token: 'nobody' } });
    // Each dripping exchange holds a slot for 1 s, then is cut and retried (and answered, the drips being over).
    await until(() => Sink.of('out2').messages.length + Sink.of('caught').messages.length === 8, 'an answer to each of the eight', 15_000);
    assert.equal(Sink.of('caught').messages.length, 0, 'all eight answered with the record after their retry');
    assert.equal(Sink.of('out3').messages.length, 1, 'the other node was answered');
    const gets = rt.sim.requests.filter((r) => r.method === 'GET' && r.path === SESSIONS_PATH && r.query.token === 'RFID-1').length;
    assert.equal(gets, 16, 'eight cut at the timeout, eight retried');
  });

  it('a 202 whose body is cut short is a success with msg.responseNote, not an error that invites a resend', async () => {
    await load(rt.sim, [START, ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'cut' });
    send('start', { payload: { locationId: 'LOC-1', evseId: '1', token: 'RFID-1' } });
    const out = await Sink.of('out').next();
    assert.equal(out.statusCode, 202);
    assert.match(String(out.responseNote), /accepted START \(202\), but its body was cut short .*: the command reached the station/);
    assert.equal(Sink.of('caught').messages.length, 0);
    assert.equal(rt.sim.counters.starts, 1);
  });

  it('a START answered 200 is passed on with msg.statusCode 200 and one warning, however many times it happens', async () => {
    await load(rt.sim, [START, ...SINKS, CATCH]);
    rt.sim.inject({ target: 'post', kind: 'status', status: 200, body: '{"status":"REJECTED"}', times: 2 });
    send('start', { payload: { locationId: 'LOC-1', evseId: '1', token: 'A' } });
    send('start', { payload: { locationId: 'LOC-1', evseId: '2', token: 'B' } });
    const [a, b] = [await Sink.of('out').nth(1), await Sink.of('out').nth(2)];
    assert.equal(a.statusCode, 200);
    assert.deepEqual(b.response, { status: 'REJECTED' });
    const warnings = loggedText().match(/answered 200 to START, not 202/g) ?? [];
    assert.equal(warnings.length, 1);
  });

  it('a service echoing the Authorization header into its 200: no token in msg.payload', async () => {
    await load(rt.sim, [START, PROGRESS, ...SINKS, CATCH]);
    await startSession();
    rt.sim.inject({ target: 'get', kind: 'echo' });
    send('progress', { payload: { token: 'RFID-1' } });
    const out = await Sink.of('out2').next();
    const token = String(rt.sim.requests.filter((r) => r.path === SESSIONS_PATH).at(-1)?.headers.authorization).replace('Bearer ', '');
    assertNoPart(JSON.stringify(out), token, 'the message');
    assert.equal((out.payload as { echo: { authorization: string } }).echo.authorization, 'Bearer ***');
  });

  it('a lone surrogate in a field: INVALID_INPUT at Catch naming it, nothing sent', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH]);
    send('progress', { payload: { token: 'RFID-\ud800' } });
    const caught = await Sink.of('caught').next();
    assert.equal((caught.error as { code: string }).code, 'INVALID_INPUT');
    assert.match((caught.error as { message: string }).message, /^token contains an unpaired UTF-16 surrogate/);
    assert.equal(rt.sim.requests.length, 0);
  });

  it('Test connection never shows a part of the secret, even when the token endpoint echoes it across the cut', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    rt.sim.inject({ target: 'token', kind: 'status', status: 400, body: JSON.stringify({ error: 'invalid_request', error_description: `${'y'.repeat(200)} ${CLIENT_SECRET}` }) });
    const res = await helper.request().post('/charging-service/test').send({ baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: 'test-client', clientSecret: CLIENT_SECRET }).expect(200);
    assert.equal(res.body.ok, false);
    assertNoPart(res.text, CLIENT_SECRET, 'the Test connection answer');
    assert.match(res.body.error, /y{100,} \*\*\*/);
  });
});
