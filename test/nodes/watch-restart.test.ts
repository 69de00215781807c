/**
 * Events once across redeploys and restarts (#17.2): each watched token's last
 * reported state is kept with the watch list, so a redeploy or a restart does
 * not report an unchanged session as `started` again, and a session that
 * ended meanwhile is reported `ended` once.
 */
import assert from 'node:assert/strict';
import type { ServiceClient } from '../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { helper, load, Sink, send, until, delay, runtimeSuite, clientFor, startSimulator } from '../harness';
import { RedProcess } from '../red-process';

const SINKS = ['out', 'caught'].map((id) => ({ id, type: 'helper' }));
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const WATCH = { id: 'watcher1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 0.2, wires: [['out']] };

async function stopSession(client: ServiceClient, sim: ChargingServiceSimulator, token: string): Promise<void> {
  const s = sim.session(token);
  await client.sendCommand({ action: 'STOP', locationId: s?.locationId ?? '', evseId: s?.evseId ?? '', token, transactionId: s?.transactionId });
  await until(() => { const now = sim.session(token); return now === undefined || now.stoppedAt !== null; }, `${token} stopped on the service`);
}

describe('watch mode: events once across redeploys (runtime + simulator)', () => {
  const rt = runtimeSuite({ startDelayMs: 0, stopDelayMs: 0 }, { chargingSession: { minPollIntervalSec: 0.1 } });
  const runtime = () => (helper as unknown as { _redNodes: { stopFlows(): Promise<void>; startFlows(): Promise<void> } })._redNodes;
  const polls = (token: string) => rt.sim.requests.filter((r) => r.method === 'GET' && r.query.token === token).length;

  it('after a redeploy: no second started for a running session, updated when its meter moved, ended once for one that ended meanwhile', async () => {
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'RD-1' });
      await client.sendCommand({ action: 'START', locationId: 'L', evseId: '2', token: 'RD-2' });
      await load(rt.sim, [{ ...WATCH, watchTokens: 'RD-2' }, ...SINKS, CATCH]);
      send('watcher1', { topic: 'watch', payload: 'RD-1' });
      const out = Sink.of('out');
      await until(() => ['RD-1', 'RD-2'].every((t) => out.messages.some((m) => m.event === 'started' && m.topic === t)), 'both started');
      await runtime().stopFlows();
      await stopSession(client, rt.sim, 'RD-2');
      await runtime().startFlows();
      // New node instances: a new sink, attached before the first poll can answer.
      const after = () => Sink.of('out').messages;
      const polled = { 'RD-1': polls('RD-1'), 'RD-2': polls('RD-2') };
      const show = () => `${after().map((m) => `${String(m.event)}:${String(m.topic)}`).join()} polls ${polls('RD-1') - polled['RD-1']}/${polls('RD-2') - polled['RD-2']} ${Sink.of('caught').messages.map((m) => JSON.stringify(m.error)).join()}`;
      await until(() => after().some((m) => m.event === 'ended') && polls('RD-1') >= polled['RD-1'] + 5 && polls('RD-2') >= polled['RD-2'] + 5, 'a few polls after the redeploy', 8000).catch((e: Error) => assert.fail(`${e.message}: ${show()}`));
      const rd1 = after().filter((m) => m.topic === 'RD-1').map((m) => m.event);
      const rd2 = after().filter((m) => m.topic === 'RD-2').map((m) => m.event);
      assert.ok(!rd1.includes('started') && !rd1.includes('pending'), `RD-1 after the redeploy: ${rd1.join()}`);
      assert.ok(rd1.includes('updated'), `the meter moved while stopped: ${rd1.join()}`);
      assert.deepEqual(rd2, ['ended'], 'ended once, nothing else');
      const ended = after().find((m) => m.topic === 'RD-2') as Record<string, unknown>;
      assert.match((ended.session as { transactionId: string }).transactionId, /^TX-/, 'ended carries the session as last seen before the redeploy');
      assert.equal(Sink.of('caught').messages.length, 0);
    } finally {
      await client.close();
    }
  });

  it('a new transaction on the same token after a redeploy is started (after the old one ended)', async () => {
    const client = clientFor(rt.sim);
    try {
      await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'RD-3' });
      await load(rt.sim, [{ ...WATCH, watchTokens: 'RD-3' }, ...SINKS, CATCH]);
      const out = Sink.of('out');
      await until(() => out.messages.some((m) => m.event === 'started'), 'started');
      const first = (out.messages.find((m) => m.event === 'started')?.session as { transactionId: string }).transactionId;
      await runtime().stopFlows();
      await stopSession(client, rt.sim, 'RD-3');
      await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'RD-3' });
      await runtime().startFlows();
      const again = Sink.of('out');
      await until(() => again.messages.some((m) => m.event === 'started'), 'the new session started');
      const events = again.messages.map((m) => `${m.event}:${(m.session as { transactionId: string } | null)?.transactionId}`);
      assert.equal(events[0], `ended:${first}`);
      assert.match(events[1], /^started:TX-/);
      assert.notEqual(events[1], `started:${first}`);
    } finally {
      await client.close();
    }
  });
});

describe('watch mode: events once across a restart of a real Node-RED process (localfilesystem store)', function () {
  this.timeout(90_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  let red: RedProcess;
  const count = (re: RegExp) => red.count(re);

  before(async () => {
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0 });
    client = clientFor(sim);
    const flow = [
      { id: 'tab', type: 'tab', label: 'restart' },
      { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '' },
      { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', watchTokens: 'P-1, P-2', interval: 0.3, contextStore: 'file', x: 200, y: 100, wires: [['log']] },
      { id: 'log', type: 'function', z: 'tab', func: "node.warn('EVENT ' + msg.event + ' ' + msg.topic); return null;", outputs: 1, x: 400, y: 100, wires: [[]] },
    ];
    red = await RedProcess.prepare('charging-restart-', flow, "    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem', config: { flushInterval: 1 } } },\n    chargingSession: { minPollIntervalSec: 0.2 },");
  });

  after(async () => {
    await red?.remove();
    await client?.close();
    await sim?.stop();
  });

  it('a clean restart: no second started for a running session, exactly one ended for one that ended while down', async () => {
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'P-1' });
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '2', token: 'P-2' });
    await red.start();
    await until(() => count(/EVENT started P-1/g) === 1 && count(/EVENT started P-2/g) === 1, 'both started', 15_000);
    await red.stop();
    await stopSession(client, sim, 'P-2');
    const polled = sim.requests.length;
    await red.start();
    const pollsSince = (t: string) => sim.requests.slice(polled).filter((r) => r.method === 'GET' && r.query.token === t).length;
    await until(() => count(/EVENT ended P-2/g) >= 1 && pollsSince('P-1') >= 5 && pollsSince('P-2') >= 5, 'five polls of each after the restart', 20_000);
    assert.equal(count(/EVENT started/g), 0, `no started after the restart:\n${red.log}`);
    assert.equal(count(/EVENT ended P-2/g), 1, 'ended once');
    assert.equal(count(/EVENT ended P-1/g), 0);
    assert.doesNotMatch(red.log, /Could not keep the watch state/);
  });

  it('kill -9 after the store wrote (flushInterval 1 s): a session started before the kill is not started again', async () => {
    // Node-RED is running from the test above; P-2 ended there. A new session on P-2 now:
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '2', token: 'P-2' });
    await until(() => count(/EVENT started P-2/g) === 1, 'P-2 started', 15_000);
    await delay(3_500); // past the watch store's batch (1 s and a tick) and localfilesystem's flush (1 s here, 30 s by default)
    await red.stop('SIGKILL');
    const polled = sim.requests.length;
    await red.start();
    const pollsSince = (t: string) => sim.requests.slice(polled).filter((r) => r.method === 'GET' && r.query.token === t).length;
    await until(() => pollsSince('P-1') >= 5 && pollsSince('P-2') >= 5, 'five polls of each after the restart', 20_000);
    assert.equal(count(/EVENT started/g), 0, `no started after kill -9 and a restart:\n${red.log}`);
    assert.equal(count(/EVENT ended/g), 0);
  });
});
