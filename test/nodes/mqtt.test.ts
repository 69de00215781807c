/**
 * Example 06 (charge on solar surplus) end to end against a real MQTT broker:
 * the test starts its own Mosquitto on a free port, points the example's broker
 * node at it through the environment (as npm start does with its in-process
 * broker), and publishes with a real MQTT client. Only the debug nodes become
 * capture nodes; the mqtt in node and the broker configuration are the
 * example's own.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { simulatorEnv } from '../../scripts/start';
import { helper, NODES, startSimulator, until, fromNodeRed, Sink, attachSinks, freePort } from '../harness';

const MOSQUITTO = ['/usr/sbin/mosquitto', '/usr/bin/mosquitto'].find((p) => fs.existsSync(p));
const EXAMPLE = path.join(__dirname, '..', '..', '..', 'examples', '06 Charge on solar surplus (MQTT).json');
const TOPIC = 'home/solar/surplus_w';
const CORE_DIR = path.dirname(fromNodeRed('@node-red/nodes/core/common/20-inject.js')).replace(/common$/, '');
/* eslint-disable @typescript-eslint/no-require-imports */
const CORE_MODULES = ['common/20-inject.js', 'common/90-comment.js', 'common/25-catch.js', 'function/10-switch.js', 'function/15-change.js', 'network/10-mqtt.js'].map((f) =>
  require(path.join(CORE_DIR, f)),
);
// The MQTT client Node-RED's own mqtt nodes use: a real client, not a mock.
const mqtt = require(fromNodeRed('mqtt')) as {
  connect(url: string): { on(ev: string, f: (...a: unknown[]) => void): void; publish(t: string, m: string, o: object, cb: (e?: Error) => void): void; end(force: boolean, o: object, cb: () => void): void };
};
/* eslint-enable @typescript-eslint/no-require-imports */

type FlowNode = Record<string, unknown> & { id: string; type: string; wires?: string[][] };

describe('example 06 against a real MQTT broker (Mosquitto)', function () {
  let broker: ChildProcess | undefined;
  let port = 0;
  let sim: ChargingServiceSimulator;
  let client: ReturnType<typeof mqtt.connect>;
  const envBefore = { ...process.env };

  before(async function () {
    if (!MOSQUITTO) {
      if (process.env.CHARGING_REQUIRE_BROWSER || process.env.CI) throw new Error('mosquitto is required (CI / CHARGING_REQUIRE_BROWSER) but is not installed: apt-get install mosquitto');
      console.log('    skipped: mosquitto is not installed (apt-get install mosquitto)');
      this.skip();
    }
    port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mosq-'));
    const conf = path.join(dir, 'mosquitto.conf');
    fs.writeFileSync(conf, `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
    broker = spawn(MOSQUITTO, ['-c', conf], { stdio: 'ignore' });
    client = await connectWithRetry(`mqtt://127.0.0.1:${port}`);
    await new Promise<void>((r) => helper.startServer(() => r()));
  });
  after(async () => {
    process.env = envBefore;
    helper.settings({});
    if (client) await new Promise<void>((r) => client.end(true, {}, () => r()));
    broker?.kill();
    if (MOSQUITTO) await new Promise<void>((r) => helper.stopServer(() => r()));
  });
  beforeEach(async () => {
    sim = await startSimulator({ startDelayMs: 100, stopDelayMs: 100 });
    Object.assign(process.env, simulatorEnv(sim), { CHARGING_MQTT_HOST: '127.0.0.1', CHARGING_MQTT_PORT: String(port) });
    const flow = (JSON.parse(fs.readFileSync(EXAMPLE, 'utf8')) as FlowNode[]).map((n) =>
      n.type === 'debug' ? ({ id: n.id, type: 'helper', z: n.z, wires: [] } as FlowNode) : n,
    );
    // A probe beside the switch sees every value the broker delivered.
    const input = flow.find((n) => n.id === 'e06-solar-mqtt') as FlowNode;
    assert.equal(input.d, undefined, 'the example ships with its mqtt in node enabled');
    input.wires = [[...(input.wires?.[0] ?? []), 'probe']];
    flow.push({ id: 'probe', type: 'helper', z: input.z, wires: [] });
    // A short guard and quick checks, so that a stop follows a start within the test (the guard is tested in control.test.ts).
    Object.assign(flow.find((n) => n.type === 'charging-control') as FlowNode, { guard: 0.5, checkInterval: 0.2 });
    helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
    await helper.load([...NODES, ...CORE_MODULES], flow as Parameters<typeof helper.load>[1], {});
    attachSinks(flow);
    // The mqtt in node shows "connected" once it has subscribed at the broker.
    const inNode = helper.getNode('e06-solar-mqtt') as unknown as { brokerConn?: { connected?: boolean; subscriptions?: Record<string, unknown> } };
    await until(() => inNode.brokerConn?.connected === true, 'mqtt in connected to the broker', 8000);
  });
  afterEach(async () => {
    await helper.unload();
    await sim.stop();
  });

  async function publish(value: number): Promise<void> {
    await new Promise<void>((resolve, reject) => client.publish(TOPIC, String(value), { qos: 1 }, (e) => (e ? reject(e) : resolve())));
  }
  /**
   * Lets the flow handle what was published: a marker value inside the band,
   * delivered after them (MQTT keeps order), then a short grace for any
   * command they would have sent to reach the simulator.
   */
  async function settle(): Promise<void> {
    const seen = Sink.of('probe').messages.length;
    await publish(2000);
    await until(() => Sink.of('probe').messages.some((m, i) => i >= seen && m.payload === 2000), 'marker delivered', 8000);
    await new Promise((r) => setTimeout(r, 300));
  }

  it('surplus above the threshold starts once; falling below the lower threshold stops once', async () => {
    await publish(4200);
    await until(() => sim.counters.starts === 1, 'one START', 8000);
    await until(() => Sink.of('e06-solar-debug').messages.some((m) => m.payload === 'charging'), 'charging', 8000);
    await publish(5000); // still sunny: same state, no second START
    await settle();
    assert.equal(sim.counters.starts, 1);
    assert.equal(sim.counters.stops, 0);
    await publish(900);
    await until(() => sim.counters.stops === 1, 'one STOP', 8000);
    await publish(500);
    await settle();
    assert.equal(sim.counters.starts, 1);
    assert.equal(sim.counters.stops, 1);
  });

  it('values flapping inside the hysteresis band (1.4 to 3.7 kW) send nothing, before and after a start', async () => {
    for (const v of [2500, 3600, 1500, 3699, 1400]) await publish(v);
    await settle();
    assert.equal(sim.counters.starts, 0);
    assert.equal(sim.counters.stops, 0);
    await publish(3700);
    await until(() => sim.counters.starts === 1, 'one START', 8000);
    for (const v of [3000, 1500, 3600, 1401, 2500]) await publish(v);
    await settle();
    assert.equal(sim.counters.starts, 1);
    assert.equal(sim.counters.stops, 0, 'dipping inside the band does not stop');
  });
});

/** Mosquitto needs a moment to listen: connect, retrying until it does (bounded). */
async function connectWithRetry(url: string): Promise<ReturnType<typeof mqtt.connect>> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    try {
      return await new Promise((resolve, reject) => {
        const c = mqtt.connect(url);
        c.on('connect', () => resolve(c));
        c.on('error', (e) => {
          c.end(true, {}, () => undefined);
          reject(e as Error);
        });
        c.on('close', () => reject(new Error('closed')));
      });
    } catch (e) {
      if (performance.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
