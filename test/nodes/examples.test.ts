/**
 * Every flow in examples/: imports cleanly (only core nodes and ours, every
 * reference resolves, no credentials inside), and works against the simulator.
 * For the test, debug nodes become capture nodes, and the parts that need
 * something outside this machine (an MQTT broker, the flow's own http-in
 * billing stand-in) are replaced by capture nodes or a local server.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { helper, NODES, startSimulator, until, fromNodeRed, CLIENT_ID, CLIENT_SECRET, Sink, send } from '../harness';

const EXAMPLES = path.join(__dirname, '..', '..', '..', 'examples');
const CORE_DIR = path.dirname(fromNodeRed('@node-red/nodes/core/common/20-inject.js')).replace(/common$/, '');
/* eslint-disable @typescript-eslint/no-require-imports */
const CORE_MODULES = ['common/20-inject.js', 'common/90-comment.js', 'function/10-switch.js', 'function/15-change.js', 'sequence/17-split.js', 'function/rbe.js', 'network/21-httprequest.js'].map((f) =>
  require(path.join(CORE_DIR, f)),
);
/* eslint-enable @typescript-eslint/no-require-imports */
const OURS = ['charging-service', 'charging-start', 'charging-progress', 'charging-stop'];

type FlowNode = Record<string, unknown> & { id: string; type: string; wires?: string[][] };

function coreTypes(): Set<string> {
  const types = new Set<string>();
  for (const dir of fs.readdirSync(CORE_DIR)) {
    const full = path.join(CORE_DIR, dir);
    if (!fs.statSync(full).isDirectory()) continue;
    for (const f of fs.readdirSync(full).filter((x) => x.endsWith('.html'))) {
      for (const m of fs.readFileSync(path.join(full, f), 'utf8').matchAll(/registerType\(\s*['"]([^'"]+)['"]/g)) types.add(m[1]);
    }
  }
  return types;
}

function readExample(file: string): FlowNode[] {
  return JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[];
}

/** The example as the test runs it: simulator URLs, captures instead of debug/mqtt/http-in nodes. */
function forTest(flow: FlowNode[], sim: ChargingServiceSimulator): { flow: FlowNode[]; credentials: Record<string, unknown> } {
  const credentials: Record<string, unknown> = {};
  const out: FlowNode[] = [];
  for (const n of flow) {
    if (n.type === 'mqtt-broker' || n.type === 'http response') continue;
    if (n.type === 'charging-service') {
      out.push({ ...n, baseUrl: sim.baseUrl, authUrl: sim.authUrl });
      credentials[n.id] = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET };
    } else if (n.type === 'debug' || n.type === 'mqtt in' || n.type === 'http in') {
      out.push({ id: n.id, type: 'helper', z: n.z, wires: n.type === 'debug' ? [] : [[]] } as FlowNode);
    } else {
      out.push(n);
    }
  }
  return { flow: out, credentials };
}

describe('examples/', () => {
  const files = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));
  const core = coreTypes();

  it('has a flow for every node and at least the real-use flows the README lists', () => {
    assert.ok(files.length >= 9, files.join());
    const used = new Set(files.flatMap((f) => readExample(f).map((n) => n.type)));
    for (const t of OURS) assert.ok(used.has(t), `an example uses ${t}`);
  });

  for (const file of files) {
    it(`${file}: only core nodes and ours, references resolve, comments explain, no credentials`, () => {
      const flow = readExample(file);
      const ids = new Set(flow.map((n) => n.id));
      for (const n of flow) {
        assert.ok(core.has(n.type) || OURS.includes(n.type) || n.type === 'tab', `${file}: unknown type ${n.type}`);
        for (const w of n.wires ?? []) for (const target of w) assert.ok(ids.has(target), `${file}: ${n.id} wired to missing ${target}`);
        if (OURS.includes(n.type) && n.type !== 'charging-service') {
          const svc = flow.find((x) => x.id === n.service);
          assert.equal(svc?.type, 'charging-service', `${file}: ${n.id} has a service`);
        }
        if (n.type === 'mqtt in' || n.type === 'charging-service') {
          const ref = n.type === 'mqtt in' ? 'broker' : 'tls';
          if (typeof n[ref] === 'string' && n[ref]) assert.ok(ids.has(n[ref] as string), `${file}: ${ref} ${n[ref]}`);
        }
      }
      assert.ok(flow.some((n) => n.type === 'comment'), `${file} explains itself with a comment node`);
      // Exported flows carry no credentials: no credentials object, no secret field.
      for (const n of flow) {
        assert.equal(n.credentials, undefined, `${file}: ${n.id} has credentials`);
        assert.equal(n.clientSecret, undefined, `${file}: ${n.id} has a secret`);
      }
    });
  }

  describe('run against the simulator', () => {
    let sim: ChargingServiceSimulator;
    let billing: http.Server;
    let billed: unknown[] = [];
    let billingUrl = '';

    before(async () => {
      await new Promise<void>((r) => helper.startServer(() => r()));
      billing = http.createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          billed.push(JSON.parse(body));
          res.writeHead(201, { 'Content-Type': 'application/json' });
          res.end('{"receipt":"R-1"}');
        });
      });
      await new Promise<void>((r) => billing.listen(0, '127.0.0.1', () => r()));
      billingUrl = `http://127.0.0.1:${(billing.address() as AddressInfo).port}/billing-demo/cdrs`;
    });
    after(async () => {
      await new Promise<void>((r) => billing.close(() => r()));
      await new Promise<void>((r) => helper.stopServer(() => r()));
    });
    beforeEach(async () => {
      billed = [];
      sim = await startSimulator({ startDelayMs: 100, stopDelayMs: 100 });
    });
    afterEach(async () => {
      await helper.unload();
      await sim.stop();
    });

    async function run(file: string, tweak: (f: FlowNode[]) => void = () => undefined): Promise<void> {
      const t = forTest(readExample(file), sim);
      tweak(t.flow);
      await helper.load([...NODES, ...CORE_MODULES], t.flow as Parameters<typeof helper.load>[1], t.credentials);
    }
    const errorsLogged = () => helper.log().args.filter((a) => a[0]?.level === 20 && String(a[0]?.type).startsWith('charging-'));

    it('01 start, follow and stop: starts, polls and stops once 50 Wh are in', async () => {
      await sim.stop();
      sim = await startSimulator({ startDelayMs: 100, stopDelayMs: 100, powerW: 200_000 }); // 50 Wh in under a second
      await run('01 Start, follow and stop a session.json');
      send('i-start', {});
      await until(() => sim.counters.starts === 1, 'START');
      send('i-poll', {});
      await new Promise((r) => setTimeout(r, 1200));
      send('i-poll', {});
      await until(() => sim.counters.stops === 1, 'STOP after 50 Wh', 8000);
      assert.deepEqual(errorsLogged(), []);
    });

    it('02-04 start, query and stop with fields in the node and in msg.payload', async () => {
      await run('02 Start a session.json');
      send('i1', {});
      await until(() => sim.counters.starts === 1, 'START');
      await helper.unload();
      await run('03 Query progress.json');
      send('i1', {});
      await until(() => Sink.of('d1').messages.length === 1, 'progress record');
      await new Promise((r) => setTimeout(r, 200));
      await helper.unload();
      await run('04 Stop a session.json');
      send('i1', {});
      await until(() => sim.counters.stops === 1, 'STOP');
      assert.deepEqual(errorsLogged(), []);
    });

    it('05 charging monitor: events for the watched tokens', async () => {
      await run('05 Charging monitor (watch mode).json', (f) => {
        const w = f.find((n) => n.id === 'm-monitor') as FlowNode;
        w.interval = 0.2;
      });
      helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
      send('m-start1', {});
      await until(() => Sink.of('m-debug').messages.some((m) => m.event === 'started' && m.topic === 'MON-RFID-1'), 'started event', 8000);
      assert.deepEqual(errorsLogged(), []);
    });

    it('06 solar surplus: sunny starts (and waits for the start), cloudy stops by token', async () => {
      await run('06 Charge on solar surplus (MQTT).json');
      send('solar-sun', {});
      await until(() => Sink.of('solar-debug').messages.length === 1, 'started', 8000);
      send('solar-sun', {}); // same state again: filtered, no second START
      send('solar-cloud', {});
      await until(() => sim.counters.stops === 1, 'STOP', 8000);
      assert.equal(sim.counters.starts, 1);
      assert.deepEqual(errorsLogged(), []);
    });

    it('07 depot: six connectors started, watched by one node, stopped', async () => {
      await run('07 Depot - several connectors.json', (f) => {
        (f.find((n) => n.id === 'depot-watch') as FlowNode).interval = 0.2;
      });
      helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
      send('depot-go', {});
      await until(() => sim.counters.starts === 6, 'six STARTs');
      await until(() => new Set(Sink.of('depot-events').messages.filter((m) => m.event === 'started').map((m) => m.topic)).size === 6, 'six started events', 8000);
      send('depot-stop-all', {});
      await until(() => sim.counters.stops === 6, 'six STOPs', 8000);
      assert.deepEqual(errorsLogged(), []);
    });

    it('08 billing: after STOP, cdrId and energy reach the billing step', async () => {
      await run('08 Billing after STOP.json', (f) => {
        (f.find((n) => n.id === 'bill-post') as FlowNode).url = billingUrl;
      });
      const started = Sink.of('bill-started');
      const result = Sink.of('bill-result'); // before anything is sent, so no message can pass uncaptured
      send('bill-start', {});
      await until(() => started.messages.length === 1, 'started', 8000);
      send('bill-stop', {});
      await until(() => billed.length === 1 && result.messages.length === 1, 'billing request and answer', 8000);
      const cdrId = (started.messages[0].session as { cdrId: string }).cdrId;
      assert.equal((billed[0] as { cdrId: string }).cdrId, cdrId);
      assert.equal(typeof (billed[0] as { energyKWh: number }).energyKWh, 'number');
      assert.deepEqual((result.messages[0] as { payload: unknown }).payload, { receipt: 'R-1' });
    });

    it('09 error handling: each failure is routed by msg.error.code', async () => {
      await run('09 Error handling with Catch.json');
      send('err-missing', {});
      send('err-nosession', {});
      await until(() => Sink.of('err-input').messages.length === 2, 'two input errors');
      const codes = Sink.of('err-input').messages.map((m) => (m.error as { code: string }).code).sort();
      assert.deepEqual(codes, ['MISSING_FIELD', 'NO_SESSION']);
      assert.equal(sim.counters.starts + sim.counters.stops, 0, 'nothing was sent');
    });
  });
});
