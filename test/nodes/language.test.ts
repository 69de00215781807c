/**
 * Badges speak Node-RED's runtime language, as core nodes' texts do: a real
 * Node-RED process started with LANG=de_DE.UTF-8, a status node passing every
 * badge of a progress node to the log.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { prepareUserDir, simulatorEnv, spawnNodeRed } from '../../scripts/start';
import { startSimulator, freePort, until, NODE_RED } from '../harness';

async function badges(lang: string, sim: ChargingServiceSimulator, watching: RegExp): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-lang-'));
  let log = '';
  let red: ChildProcess | null = null;
  try {
    const port = await freePort();
    prepareUserDir(dataDir, port, 'empty');
    const flow = [
      { id: 'tab', type: 'tab', label: 'lang' },
      { id: 'svc', type: 'charging-service', name: '', baseUrl: '${CHARGING_BASE_URL}', authUrl: '${CHARGING_AUTH_URL}', scope: '' },
      { id: 'go', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{"token":"NOBODY"}', payloadType: 'json', repeat: '', once: true, onceDelay: 0.2, wires: [['q']] },
      { id: 'q', type: 'charging-progress', z: 'tab', service: 'svc', wires: [[]] },
      { id: 'watch', type: 'status', z: 'tab', scope: ['q', 'w'], wires: [['show']] },
      // A badge with a value filled in (the runtime's template, filled by the status helper): a third token added by message.
      { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', watchTokens: 'LANG-1 LANG-2', interval: 30, wires: [[]] },
      { id: 'add', type: 'inject', z: 'tab', props: [{ p: 'topic', vt: 'str' }, { p: 'payload' }], topic: 'watch', payload: 'LANG-3', payloadType: 'str', repeat: '', once: true, onceDelay: 0.5, wires: [['w']] },
      { id: 'show', type: 'debug', z: 'tab', active: true, tosidebar: false, console: true, complete: 'status.text', targetType: 'msg', wires: [] },
    ];
    fs.writeFileSync(path.join(dataDir, 'flows.json'), JSON.stringify(flow));
    red = spawnNodeRed(dataDir, port, 'pipe', path.join(path.dirname(NODE_RED), '..', 'red.js'), { ...simulatorEnv(sim), LANG: lang, LC_ALL: lang });
    red.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    red.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    await until(() => (/\[debug:show\][\s\S]*\[debug:show\][\s\S]*\[debug:show\]/.test(log) && watching.test(log)) || red?.exitCode !== null, 'three badges', 30_000).catch((err: Error) => { throw new Error(`${err.message}: ${log.slice(-1500)}`); });
    return log;
  } finally {
    if (red && red.exitCode === null) {
      red.kill('SIGINT');
      await new Promise((r) => red?.once('exit', r));
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('badge texts in the runtime language (a real Node-RED process)', function () {
  this.timeout(60_000);
  let sim: ChargingServiceSimulator;
  before(async () => {
    sim = await startSimulator({ clientId: 'demo-client', clientSecret: 'demo-secret' });
  });
  after(() => sim.stop());

  it('German with LANG=de_DE.UTF-8: "frage ab…", then "keine Sitzung", and "beobachtet 3" with its value', async () => {
    const log = await badges('de_DE.UTF-8', sim, /beobachtet 3/);
    assert.match(log, /beobachtet 3 · \d\d:\d\d:\d\d/, 'a value filled into the German template');
    assert.match(log, /\[debug:show\]\s*\n?.*frage ab…/);
    assert.match(log, /keine Sitzung · \d\d:\d\d:\d\d/);
    assert.doesNotMatch(log, /charging-service\.status\./, 'no untranslated key');
  });

  it('English with LANG=en_US.UTF-8: "querying…", then "no session"', async () => {
    const log = await badges('en_US.UTF-8', sim, /watching 3/);
    assert.match(log, /watching 3 · \d\d:\d\d:\d\d/);
    assert.match(log, /querying…/);
    assert.match(log, /no session · \d\d:\d\d:\d\d/);
    assert.doesNotMatch(log, /keine Sitzung/);
  });
});
