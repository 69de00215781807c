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
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { dashboardDir, demoFlow, simulatorEnv } from '../../scripts/start';
import { helper, NODES, startSimulator, until, fromNodeRed, Sink, send, clientFor, statusCalls, attachSinks, delay } from '../harness';

const EXAMPLES = path.join(__dirname, '..', '..', '..', 'examples');
const CORE_DIR = path.dirname(fromNodeRed('@node-red/nodes/core/common/20-inject.js')).replace(/common$/, '');
/* eslint-disable @typescript-eslint/no-require-imports */
const CORE_MODULES = ['common/20-inject.js', 'common/90-comment.js', 'function/10-switch.js', 'function/15-change.js', 'sequence/17-split.js', 'function/rbe.js', 'network/21-httprequest.js', 'function/10-function.js', 'parsers/70-CSV.js', 'storage/10-file.js'].map((f) =>
  require(path.join(CORE_DIR, f)),
);
/* eslint-enable @typescript-eslint/no-require-imports */
const OURS = ['charging-service', 'charging-start', 'charging-progress', 'charging-stop', 'charging-control', 'charging-ledger', 'charging-metrics', 'charging-depot', 'charging-depot-status'];

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

/** Dashboard 2.0's node types (example 11 needs them), from its installed package. */
function dashboardTypes(): Set<string> {
  const dir = dashboardDir();
  const manifest = dir ? (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { 'node-red': { nodes: Record<string, string> } }) : null;
  return new Set(Object.keys(manifest?.['node-red'].nodes ?? {}));
}
/** The examples that need Dashboard 2.0 besides core nodes and ours. */
const DASHBOARD_EXAMPLES = ['11 Charging dashboard.json', '13 Depot with a limit.json', '14 Metrics for Prometheus.json'];

function readExample(file: string): FlowNode[] {
  return JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[];
}

/**
 * The example as the test runs it: unchanged, but for capture nodes in place of
 * debug, mqtt-in and http-in nodes. Its configurations read the simulator from
 * the environment, exactly as under npm start: nothing is typed in.
 */
function forTest(flow: FlowNode[]): FlowNode[] {
  const out: FlowNode[] = [];
  for (const n of flow) {
    if (n.type === 'mqtt-broker' || n.type === 'http response') continue;
    if (n.type === 'debug' || n.type === 'mqtt in' || n.type === 'http in') {
      out.push({ id: n.id, type: 'helper', z: n.z, wires: n.type === 'debug' ? [] : [[]] } as FlowNode);
    } else {
      out.push(n);
    }
  }
  return out;
}

describe('examples/', () => {
  const files = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));
  const core = coreTypes();
  const dashboard = dashboardTypes();

  it('ids are unique across all examples and the deployed demo: importing any example into npm start asks no conflict question', () => {
    const seen = new Map<string, string>();
    for (const [where, flow] of [...files.map((f) => [f, readExample(f)] as const), ['npm start demo', demoFlow() as FlowNode[]] as const]) {
      for (const n of flow) {
        assert.equal(seen.get(n.id), undefined, `${where}: id ${n.id} is also in ${seen.get(n.id)}`);
        seen.set(n.id, where);
      }
    }
  });

  it('every configuration reads the service from the environment, and the comments say what to change for a real service', () => {
    for (const file of files) {
      const flow = readExample(file);
      for (const svc of flow.filter((n) => n.type === 'charging-service')) {
        assert.equal(svc.baseUrl, '${CHARGING_BASE_URL}', file);
        assert.equal(svc.authUrl, '${CHARGING_AUTH_URL}', file);
        assert.equal(svc.name, '', `${file}: named by its host, not "Bundled simulator"`);
      }
      const comments = flow.filter((n) => n.type === 'comment').map((n) => String(n.info)).join(' ');
      assert.match(comments, /To use a real service: .*CHARGING_CLIENT_SECRET/, file);
      assert.doesNotMatch(comments, /Bundled simulator|Set the client ID/, `${file}: nothing to type`);
      // Node-RED 4 warns on every deploy about a filter node without its topic property.
      for (const rbe of flow.filter((n) => n.type === 'rbe')) assert.notEqual(rbe.topi, '', `${file}: ${rbe.id} has topi ""`);
    }
  });

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
        const extra = DASHBOARD_EXAMPLES.includes(file) && dashboard.has(n.type); // Dashboard 2.0 is a devDependency
        assert.ok(core.has(n.type) || OURS.includes(n.type) || n.type === 'tab' || extra, `${file}: unknown type ${n.type}`);
        for (const w of n.wires ?? []) for (const target of w) assert.ok(ids.has(target), `${file}: ${n.id} wired to missing ${target}`);
        if (n.type === 'charging-depot-status' || (n.type === 'charging-control' && n.depot)) {
          assert.equal(flow.find((x) => x.id === n.depot)?.type, 'charging-depot', `${file}: ${n.id} names a depot of the flow`);
        }
        if (OURS.includes(n.type) && !['charging-service', 'charging-metrics', 'charging-depot', 'charging-depot-status'].includes(n.type)) {
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

  describe('run against the simulator, configured from the environment as npm start does', () => {
    let sim: ChargingServiceSimulator;
    let billing: http.Server;
    let billed: unknown[] = [];
    let billingUrl = '';
    const envBefore = { ...process.env };

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
      process.env = envBefore;
      await new Promise<void>((r) => billing.close(() => r()));
      await new Promise<void>((r) => helper.stopServer(() => r()));
    });
    async function simulator(opts: Parameters<typeof startSimulator>[0] = {}): Promise<void> {
      await sim?.stop();
      sim = await startSimulator({ startDelayMs: 100, stopDelayMs: 100, ...opts });
      Object.assign(process.env, simulatorEnv(sim));
    }
    beforeEach(async () => {
      billed = [];
      await simulator();
    });
    afterEach(async () => {
      await helper.unload();
      await sim.stop();
    });

    async function run(file: string, tweak: (f: FlowNode[]) => void = () => undefined): Promise<void> {
      const flow = forTest(readExample(file));
      tweak(flow);
      // Fast polls for the test: the interval floor is lowered with it.
      helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
      for (const n of flow) if (n.type === 'charging-progress' && n.mode === 'watch') n.interval = 0.2;
      // A short guard and quick checks: the stories end within the test (the guard itself is tested in control.test.ts).
      for (const n of flow) if (n.type === 'charging-control') Object.assign(n, { guard: 0.5, checkInterval: 0.2 });
      for (const n of flow) if (n.type === 'inject' && n.once) n.onceDelay = 0.1; // they fire by themselves, as after a deploy
      await helper.load([...NODES, ...CORE_MODULES], flow as Parameters<typeof helper.load>[1], {});
      attachSinks(flow); // watch mode and once-injects send by themselves: capture from the start
    }
    const errorsLogged = () => helper.log().args.filter((a) => a[0]?.level === 20);
    const redStatuses = () => statusCalls().filter((s) => s.fill === 'red');

    it('01 demo: starts once, follows, stops once at 50 Wh, then stays quiet; no error, no red status', async () => {
      await simulator({ powerW: 200_000 }); // 50 Wh in under a second
      await run('01 Start, follow and stop a session.json');
      await until(() => Sink.of('e01-d-stop').messages.length === 1, 'stopped', 8000);
      await until(() => Sink.of('e01-d-event').messages.some((m) => m.event === 'ended'), 'ended event', 8000);
      assert.equal(sim.counters.starts, 1);
      assert.equal(sim.counters.stops, 1);
      assert.equal(Sink.of('e01-d-start').messages.length, 1);
      // Quiet after the story: several more polls, not one more message.
      const seen = Sink.of('e01-d-event').messages.length;
      const polls = sim.counters.progressQueries;
      await until(() => sim.counters.progressQueries >= polls + 5, 'more polls');
      assert.equal(Sink.of('e01-d-event').messages.length, seen);
      assert.deepEqual(errorsLogged(), []);
      assert.deepEqual(redStatuses(), []);
    });

    it('01 demo deployed again while its session still charges: no second START (no 409), the session is followed and stopped once', async () => {
      await simulator({ powerW: 200_000 });
      const client = clientFor(sim, { clientId: sim.options.clientId, clientSecret: sim.options.clientSecret });
      await client.sendCommand({ action: 'START', locationId: 'E01-LOC', evseId: '1', token: 'E01-RFID-1' });
      await client.close();
      await until(() => sim.session('E01-RFID-1') !== undefined, 'session');
      await run('01 Start, follow and stop a session.json');
      await until(() => sim.counters.stops === 1, 'STOP', 8000);
      await until(() => Sink.of('e01-d-event').messages.some((m) => m.event === 'ended'), 'ended event', 8000);
      assert.equal(sim.counters.starts, 1, 'only the START made before the deploy');
      assert.equal(Sink.of('e01-d-start').messages.length, 0);
      assert.deepEqual(errorsLogged(), []);
      assert.deepEqual(redStatuses(), []);
    });

    it('02-04 start, query and stop with fields in the node and in msg.payload', async () => {
      await run('02 Start a session.json');
      send('e02-i1', {});
      await until(() => sim.counters.starts === 1, 'START');
      await helper.unload();
      await run('03 Query progress.json');
      send('e03-i1', {});
      await until(() => Sink.of('e03-d1').messages.length === 1, 'progress record');
      await new Promise((r) => setTimeout(r, 200));
      await helper.unload();
      await run('04 Stop a session.json');
      send('e04-i1', {});
      await until(() => sim.counters.stops === 1, 'STOP');
      assert.deepEqual(errorsLogged(), []);
    });

    it('05 charging monitor: starts E05-RFID-1 once, reports its events, stops it once at 0.1 kWh', async () => {
      await simulator({ powerW: 200_000 });
      await run('05 Charging monitor (watch mode).json');
      await until(() => Sink.of('e05-d-event').messages.some((m) => m.event === 'started' && m.topic === 'E05-RFID-1'), 'started event', 8000);
      await until(() => Sink.of('e05-d-event').messages.some((m) => m.event === 'ended' && m.topic === 'E05-RFID-1'), 'ended event', 8000);
      assert.equal(sim.counters.starts, 1);
      assert.equal(sim.counters.stops, 1);
      assert.deepEqual(errorsLogged(), []);
      assert.deepEqual(redStatuses(), []);
    });

    it('06 solar surplus: sunny wants the car charging (one START), sunny again sends nothing, cloudy stops it once', async () => {
      await run('06 Charge on solar surplus (MQTT).json');
      const states = () => Sink.of('e06-solar-debug').messages.map((m) => m.payload);
      send('e06-solar-sun', {});
      await until(() => states().includes('charging'), 'charging', 8000);
      send('e06-solar-sun', {}); // the same wish again: nothing to send
      await new Promise((r) => setTimeout(r, 600));
      send('e06-solar-cloud', {});
      await until(() => sim.counters.stops === 1 && states().at(-1) === 'idle', 'stopped, idle', 8000);
      assert.equal(sim.counters.starts, 1);
      assert.deepEqual(states(), ['starting', 'charging', 'guard', 'stopping', 'idle'].filter((s) => states().includes(s)), 'in order, each once');
      assert.deepEqual(errorsLogged(), []);
      assert.deepEqual(redStatuses(), []);
    });

    it('07 depot: six connectors started, watched by one node, stopped', async () => {
      await run('07 Depot - several connectors.json');
      send('e07-depot-go', {});
      await until(() => sim.counters.starts === 6, 'six STARTs');
      await until(() => new Set(Sink.of('e07-depot-events').messages.filter((m) => m.event === 'started').map((m) => m.topic)).size === 6, 'six started events', 8000);
      send('e07-depot-stop-all', {});
      await until(() => sim.counters.stops === 6, 'six STOPs', 8000);
      assert.deepEqual(errorsLogged(), []);
    });

    it('08 billing: after STOP, cdrId and energy reach the billing step', async () => {
      await run('08 Billing after STOP.json', (f) => {
        (f.find((n) => n.id === 'e08-bill-post') as FlowNode).url = billingUrl;
      });
      const started = Sink.of('e08-bill-started');
      const result = Sink.of('e08-bill-result'); // before anything is sent, so no message can pass uncaptured
      send('e08-bill-start', {});
      await until(() => started.messages.length === 1, 'started', 8000);
      send('e08-bill-stop', {});
      await until(() => billed.length === 1 && result.messages.length === 1, 'billing request and answer', 8000);
      const cdrId = (started.messages[0].session as { cdrId: string }).cdrId;
      assert.equal((billed[0] as { cdrId: string }).cdrId, cdrId);
      assert.equal(typeof (billed[0] as { energyKWh: number }).energyKWh, 'number');
      assert.deepEqual((result.messages[0] as { payload: unknown }).payload, { receipt: 'R-1' });
    });

    it('09 error handling: input errors to "fix the input", a configuration error to "check the configuration", never to "retry later"', async () => {
      await run('09 Error handling with Catch.json');
      send('e09-err-missing', {});
      send('e09-err-nosession', {});
      await until(() => Sink.of('e09-err-input').messages.length === 2, 'two input errors');
      const codes = Sink.of('e09-err-input').messages.map((m) => (m.error as { code: string }).code).sort();
      assert.deepEqual(codes, ['MISSING_FIELD', 'NO_SESSION']);
      assert.equal(sim.counters.starts + sim.counters.stops, 0, 'nothing was sent');
      assert.equal(typeof Sink.of('e09-err-input').messages[0].error, 'object');
      assert.doesNotMatch(String((Sink.of('e09-err-input').messages[0].error as { message: string }).message), /^ChargingError/);
      await helper.unload();
      delete process.env.CHARGING_CLIENT_SECRET;
      await run('09 Error handling with Catch.json');
      send('e09-err-nosession', {});
      await until(() => Sink.of('e09-err-auth').messages.length === 1, 'configuration error routed');
      assert.equal((Sink.of('e09-err-auth').messages[0].error as { code: string }).code, 'CONFIG');
      assert.match(String((Sink.of('e09-err-auth').messages[0].error as { message: string }).message), /CHARGING_CLIENT_SECRET/);
      assert.equal(Sink.of('e09-err-other').messages.length, 0);
    });

    it('10 session log: each session booked once (watch and stop both say ended), priced; the month\'s CSV on the button; the upsert; last month\'s statement', async () => {
      await simulator({ powerW: 200_000 });
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'e10-'));
      process.env.CHARGING_LEDGER_DIR = dir;
      try {
        await run('10 Session log.json', (flow) => {
          (flow.find((n) => n.id === 'e10-n-ledger')?.wires as string[][])[1].push('t-answers');
          flow.push({ id: 't-answers', type: 'helper', z: 'e10-tab', wires: [] } as FlowNode);
        });
        const records = Sink.of('e10-d-record');
        const transactions: string[] = [];
        for (const n of [1, 2]) {
          send('e10-i-start', {});
          await until(() => (sim.session('E10-RFID-1')?.startedAt ?? Infinity) + 300 <= Date.now(), `session ${n} charging`, 8000);
          transactions.push(sim.session('E10-RFID-1')?.transactionId as string);
          send('e10-i-stop', {});
          await until(() => records.messages.length === n, `session ${n} booked`, 8000);
        }
        await delay(600); // the watch node's ended after the stop node's: nothing more
        assert.deepEqual(records.messages.map((m) => m.recordId), transactions, 'one record per session');
        const recs = records.messages.map((m) => m.payload as Record<string, unknown>);
        for (const r of recs) {
          assert.equal(r.label, 'Anna');
          assert.ok(Number(r.energyWh) > 0 && typeof r.cost === 'number' && r.currency === 'EUR', JSON.stringify(r));
        }
        const upserts = Sink.of('e10-d-upsert').messages;
        assert.deepEqual(JSON.parse(JSON.stringify(upserts.map((m) => (m.params as unknown[]).slice(0, 2)))), transactions.map((t) => [t, 1]));
        assert.match(String(upserts[0].topic), /ON CONFLICT \(record_id\) DO UPDATE .* WHERE excluded\.revision > charging_sessions\.revision/);
        send('e10-i-csv', {});
        await until(() => Sink.of('e10-d-csv').messages.length === 1, 'the CSV written', 8000);
        const file = String(Sink.of('e10-d-csv').messages[0].filename);
        assert.equal(path.dirname(file), dir);
        const lines = fs.readFileSync(file, 'utf8').split('\r\n');
        assert.equal(lines.pop(), '');
        assert.equal(lines.length, 3, 'the header and one line per session');
        assert.deepEqual(lines.slice(1).map((l) => l.split(',')[0]), transactions);
        send('e10-i-report', {});
        await until(() => Sink.of('e10-d-statement').messages.length === 1, 'the statement', 8000);
        const statement = Sink.of('e10-d-statement').messages[0].payload as { month: string; sessions: number };
        const d = new Date();
        d.setDate(1);
        d.setMonth(d.getMonth() - 1);
        assert.equal(statement.month, `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}`);
        assert.deepEqual(errorsLogged(), []);
        assert.deepEqual(redStatuses(), []);
      } finally {
        delete process.env.CHARGING_LEDGER_DIR;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('10 session log: a session stopped and the next one started on the same card between two polls, the next first seen pending, books both', async () => {
      // The next session stays pending for 1.5 s; the stopped one is gone at once: the poll after the swap sees only the pending one.
      await simulator({ powerW: 200_000, startDelayMs: 1_500, stopDelayMs: 0 });
      const client = clientFor(sim);
      try {
        await run('10 Session log.json', (flow) => {
          (flow.find((n) => n.id === 'e10-n-watch')?.wires as string[][])[0].push('t-events');
          flow.push({ id: 't-events', type: 'helper', z: 'e10-tab', wires: [] } as FlowNode);
        });
        const events = Sink.of('t-events');
        const card = { locationId: 'E10-LOC', evseId: '1', token: 'E10-RFID-1' };
        send('e10-i-start', {});
        await until(() => events.messages.some((m) => m.event === 'updated'), 'the first session charging', 8000);
        const first = sim.session(card.token);
        assert.ok(first?.transactionId);
        await client.sendCommand({ action: 'STOP', ...card, transactionId: first.transactionId });
        await client.sendCommand({ action: 'START', ...card });
        await until(() => events.messages.some((m) => m.event === 'started' && (m.session as { transactionId: string }).transactionId !== first.transactionId), 'the next session started', 8000);
        const kinds = events.messages.map((m) => String(m.event)).filter((e) => e !== 'updated');
        assert.deepEqual(kinds.slice(-4), ['started', 'ended', 'pending', 'started'], 'ended A, then the pending one, then started B');
        const a = (events.messages.find((m) => m.event === 'ended') as Record<string, unknown>).session as Record<string, unknown>;
        send('e10-i-stop', {});
        const records = Sink.of('e10-d-record');
        await until(() => records.messages.length === 2, 'both sessions booked', 8000);
        const second = (events.messages.find((m) => m.event === 'started' && (m.session as { transactionId: string }).transactionId !== first.transactionId)?.session as { transactionId: string }).transactionId;
        assert.deepEqual(records.messages.map((m) => m.recordId), [first.transactionId, second], 'one record for each session, in order');
        assert.equal((records.messages[0].payload as { energyWh: number }).energyWh, Math.round(Number(a.energyKWh) * 1000), "the first record holds A's energy");
        assert.deepEqual(errorsLogged(), []);
      } finally {
        await client.close();
      }
    });

    it('14 metrics: the JSON every few seconds becomes the page\'s figures (3 watched, none charging, requests per second, no failure, Redis not used)', async () => {
      await run('14 Metrics for Prometheus.json', (flow) => {
        // The widgets become capture nodes, their Dashboard 2.0 configuration goes: the test loads no Dashboard.
        for (let i = flow.length - 1; i >= 0; i--) {
          const n = flow[i];
          if (n.type === 'ui-text' || n.type === 'ui-chart') flow[i] = { id: n.id, type: 'helper', z: n.z, wires: [] } as FlowNode;
          else if (String(n.type).startsWith('ui-')) flow.splice(i, 1);
          else if (n.type === 'inject') n.repeat = '0.3';
        }
        flow.push({ id: 'e14-out', type: 'helper', z: 'e14-tab', wires: [] } as FlowNode); // in place of http response
      });
      await until(() => Sink.of('e14-w-watched').messages.some((m) => m.payload === 3), 'three watched', 8000);
      await until(() => Sink.of('e14-w-rate').messages.some((m) => typeof m.payload === 'number' && m.payload > 0), 'requests per second', 8000);
      assert.equal(Sink.of('e14-w-charging').messages.at(-1)?.payload, 0);
      assert.equal(Sink.of('e14-w-errors').messages.at(-1)?.payload, '0');
      assert.equal(Sink.of('e14-w-redis').messages.at(-1)?.payload, 'not used (one replica)');
      assert.match(String(Sink.of('e14-w-tokens').messages.at(-1)?.payload), /^1 taken, 0 failed$/);
      // The endpoint's node answers any message with the text exposition and its content type.
      send('e14-metrics', { payload: 'GET' });
      const answer = await Sink.of('e14-out').next();
      assert.match(String(answer.payload), /^chargectl_watched_sessions\{config="e14-service"\} 3$/m, 'an unnamed configuration is labelled by its id');
      assert.match(String((answer.headers as Record<string, string>)['content-type']), /^text\/plain; version=0\.0\.4/);
      assert.equal(sim.counters.starts, 0, 'the example starts nothing');
    });

    it('12 cheapest hours: the price scheduler\'s true/false reaches charging-control; a cheap hour starts once, an expensive one stops', async () => {
      const probe = (f: FlowNode[]) => {
        const cheapest = f.find((n) => n.id === 'e12-f-cheapest') as FlowNode;
        cheapest.wires = [['e12-n-control', 'e12-probe'], ['e12-n-control', 'e12-probe']];
        f.push({ id: 'e12-probe', type: 'helper', z: cheapest.z, wires: [] } as FlowNode);
      };
      await run('12 Charge in the cheapest hours.json', probe);
      const states = () => Sink.of('e12-d-state').messages.map((m) => m.payload);
      // The prices of the example, sent at deploy: the wish depends on the hour it is now.
      await until(() => Sink.of('e12-probe').messages.length === 1, 'the scheduler\'s first wish');
      const first = Sink.of('e12-probe').messages[0].payload;
      assert.equal(typeof first, 'boolean');
      await until(() => states().at(-1) === (first ? 'charging' : 'idle'), `${String(first)} carried out`, 8000);
      assert.equal(sim.counters.starts, first ? 1 : 0);
      // A day in which the hour now is the cheapest, then the dearest: on, then off.
      const hour = new Date().getHours();
      const day = (at: number) => ({ prices: Array.from({ length: 24 }, (_, h) => (h === hour ? at : 0.3)) });
      send('e12-f-cheapest', { payload: day(0.1) });
      send('e12-f-cheapest', { payload: day(0.1) }); // a reschedule says it again: nothing more
      await until(() => states().at(-1) === 'charging', 'charging in a cheap hour', 8000);
      assert.equal(sim.counters.starts, 1);
      send('e12-f-cheapest', { payload: day(0.9) });
      await until(() => states().at(-1) === 'idle' && sim.counters.stops === 1, 'stopped in a dear hour', 8000);
      assert.equal(Sink.of('e12-d-state').messages.at(-1)?.wanted, false);
      assert.equal(sim.counters.starts, 1);
      assert.deepEqual(errorsLogged(), []);
    });

    it('13 depot: six on, two charge and four queue in order on the page\'s table; the slider raises the limit; turns hand the slots on, never more than the limit at once', async () => {
      // The page's widgets become capture nodes (Dashboard 2.0 is tested in the browser suite); turns of 1.5 s instead of 30 min.
      const widgets = (f: FlowNode[]) => {
        for (let i = f.length - 1; i >= 0; i--) {
          const n = f[i];
          if (['ui-base', 'ui-theme', 'ui-page', 'ui-group'].includes(n.type)) f.splice(i, 1);
          else if (n.type.startsWith('ui-')) f[i] = { id: n.id, type: 'helper', z: n.z, wires: [] } as FlowNode;
          else if (n.type === 'charging-depot') Object.assign(n, { minRun: 1.5, turn: 1.5 });
        }
      };
      await run('13 Depot with a limit.json', widgets);
      const table = () => (Sink.of('e13-w-table').messages.at(-1)?.payload ?? []) as Array<Record<string, unknown>>;
      const charging = () => table().filter((r) => r.State === 'charging').length;
      await until(() => sim.counters.starts === 2 && table().filter((r) => r.State === 'queued').length === 4, 'two charging, four queued on the table', 10_000);
      assert.deepEqual(table().map((r) => r['In line']).filter((p) => p !== ''), [1, 2, 3, 4]);
      await until(() => charging() === 2, 'two charging on the table');
      assert.equal(Sink.of('e13-w-summary').messages.at(-1)?.payload, '2 of 2 charging, 4 waiting');
      assert.match(String(Sink.of('e13-d-state').messages.find((m) => /queued/.test(String(m.payload)))?.payload), /^E13-RFID-\d: queued \(waiting for a slot: 2 of 2 in use, \d\w\w of \d\)$/);
      send('e13-ch-limit', { payload: 3 }); // the slider
      await until(() => sim.counters.starts === 3, 'the next in line starts under the raised limit', 8000);
      await until(() => sim.counters.starts >= 6, 'turns hand the slots on', 20_000);
      assert.ok(sim.peakSessions((x) => x.locationId === 'E13-LOC') <= 3, `peak ${sim.peakSessions((x) => x.locationId === 'E13-LOC')}`);
      assert.equal(sim.counters.duplicateStarts, 0);
      assert.deepEqual(errorsLogged(), []);
      assert.deepEqual(redStatuses(), []);
    });
  });
});
