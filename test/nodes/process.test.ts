/**
 * The crash case in a real Node-RED process (not the test helper): a progress
 * record nested 5000 levels, wired to two nodes, used to overflow Node-RED's
 * message clone and end the process with an unhandled rejection. Here the
 * process must stay up, report each failure, and keep serving messages.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { ServiceClient } from '../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { prepareUserDir, spawnNodeRed } from '../../scripts/start';
import { CLIENT_ID, CLIENT_SECRET, startSimulator, freePort, until, NODE_RED } from '../harness';

describe('a real Node-RED process under hostile payloads', function () {
  this.timeout(60_000);
  let sim: ChargingServiceSimulator;
  let red: ChildProcess | null = null;
  let log = '';
  let dataDir = '';

  before(async () => {
    sim = await startSimulator({ startDelayMs: 0 });
    // A running session, so that a progress query answers 200 with a record to nest.
    const client = new ServiceClient({ baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
    await client.sendCommand({ action: 'START', locationId: 'LOC-1', evseId: '1', token: 'RFID-1' });
    await client.close();
    sim.inject({ target: 'get', kind: 'deep', depth: 5000, times: Infinity });

    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-process-'));
    const port = await freePort();
    prepareUserDir(dataDir, port, 'empty');
    const debug = (id: string, x: number, y: number) => ({ id, type: 'debug', z: 'tab', active: true, tosidebar: false, console: true, complete: 'true', targetType: 'full', x, y, wires: [] });
    const flow = [
      { id: 'tab', type: 'tab', label: 'hostile' },
      { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 5, maxInFlight: 4 },
      // Every second: a query whose answer is nested 5000 deep, to two wires.
      { id: 'tick', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{"token":"RFID-1"}', payloadType: 'json', repeat: '1', once: true, onceDelay: 0.5, x: 100, y: 100, wires: [['deep-record']] },
      { id: 'deep-record', type: 'charging-progress', z: 'tab', service: 'svc', x: 300, y: 100, wires: [['d1', 'd2']] },
      // Every second: an input message nested 5000 deep, which Node-RED cannot clone for two wires.
      { id: 'tick2', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{"token":"nobody"}', payloadType: 'json', repeat: '1', once: true, onceDelay: 0.7, x: 100, y: 200, wires: [['nest']] },
      { id: 'nest', type: 'function', z: 'tab', func: 'let v = 1; for (let i = 0; i < 5000; i++) v = { x: v }; msg.extra = v; return msg;', outputs: 1, x: 250, y: 200, wires: [['deep-input']] },
      { id: 'deep-input', type: 'charging-progress', z: 'tab', service: 'svc', x: 400, y: 200, wires: [['d3', 'd4']] },
      { id: 'catch', type: 'catch', z: 'tab', scope: null, uncaught: false, x: 100, y: 300, wires: [['caught']] },
      { id: 'caught', type: 'debug', z: 'tab', active: true, tosidebar: false, console: true, complete: 'error.message', targetType: 'msg', x: 300, y: 300, wires: [] },
      debug('d1', 500, 80),
      debug('d2', 500, 120),
      debug('d3', 600, 180),
      debug('d4', 600, 220),
    ];
    fs.writeFileSync(path.join(dataDir, 'flows.json'), JSON.stringify(flow));
    fs.writeFileSync(path.join(dataDir, 'flows_cred.json'), JSON.stringify({ svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } }));
    red = spawnNodeRed(dataDir, port, 'pipe', path.join(path.dirname(NODE_RED), '..', 'red.js'));
    red.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    red.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    await until(() => /Started flows/.test(log) || red?.exitCode !== null, 'Node-RED to start', 30_000);
    assert.match(log, /Started flows/, `Node-RED did not start:\n${log}`);
  });

  after(async () => {
    if (red && red.exitCode === null) {
      red.kill('SIGINT');
      await new Promise((r) => red?.once('exit', r));
    }
    await sim?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('stays up for five rounds of each, reporting every failure and passing nothing deep on', async () => {
    const count = (re: RegExp) => (log.match(re) ?? []).length;
    await until(() => count(/nested deeper than 64 levels/g) >= 5 && count(/could not be passed to Catch/g) >= 5, 'five rounds of each failure', 30_000);
    assert.equal(red?.exitCode, null, `Node-RED exited:\n${log}`);
    assert.doesNotMatch(log, /Unhandled|uncaughtException|RangeError: Maximum call stack size exceeded\n\s+at/, 'no crash trace');
    // Nothing deep reached the debug nodes of the first flow: the record never became a message.
    assert.doesNotMatch(log, /\[debug:d1\]/);
  });
});
