/**
 * Shared test plumbing: a real Node-RED runtime (node-red-node-test-helper), the
 * real simulator over 127.0.0.1, and helpers to collect what a flow emits.
 */
import net from 'node:net';
import helper from 'node-red-node-test-helper';
import { ChargingError } from '../nodes/lib/errors';
import { ServiceClient, ServiceClientOptions } from '../nodes/lib/client/service-client';
import type { Node } from 'node-red';
import { ChargingServiceSimulator, SESSIONS_PATH, SimulatorOptions } from '../simulator/simulator';

/**
 * The Node-RED runtime under test: this repo's (4.x) by default; CHARGING_NODE_RED
 * points at another install (scripts/test-node-red-5.js runs the suite on 5.x).
 */
export const NODE_RED = process.env.CHARGING_NODE_RED ?? require.resolve('node-red');

/** A module from inside the Node-RED under test (core nodes, runtime internals). */
export function fromNodeRed(id: string): string {
  return require.resolve(id, { paths: [NODE_RED] });
}

helper.init(NODE_RED);

/* eslint-disable @typescript-eslint/no-require-imports */
export const NODES = [
  require('../nodes/charging-service'),
  require('../nodes/charging-start'),
  require('../nodes/charging-progress'),
  require('../nodes/charging-stop'),
  require('../nodes/charging-control'),
  require('../nodes/charging-ledger'),
  require('../nodes/charging-metrics'),
  require('../nodes/charging-depot'),
  require('../nodes/charging-depot-status'),
];
/* eslint-enable @typescript-eslint/no-require-imports */

export { helper };

// eslint-disable-next-line @typescript-eslint/no-require-imports
const NODE_PROTO = require(fromNodeRed('@node-red/runtime/lib/nodes/Node')).prototype as {
  status: { getCalls?: () => Array<{ thisValue: Node; args: unknown[] }> };
};

export const CLIENT_ID = 'test-client';
export const CLIENT_SECRET = 'S3cr3t-Value-That-Must-Never-Leak';

export async function startSimulator(opts: SimulatorOptions = {}): Promise<ChargingServiceSimulator> {
  return new ChargingServiceSimulator({
    // Read at each call, so that a test that fakes the clock sees the simulator on its clock too.
    now: () => Date.now(),
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    startDelayMs: 50,
    stopDelayMs: 50,
    ...opts,
  }).start();
}

/** The most service requests (token requests aside) that arrived at the simulator within any 1 s window. */
export function busiestSecond(sim: ChargingServiceSimulator): number {
  const at = sim.requests.filter((r) => r.path === SESSIONS_PATH).map((r) => r.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** A ServiceClient for the simulator with the test credentials; each test file passes its own timings. */
export function clientFor(sim: ChargingServiceSimulator, options: Partial<ServiceClientOptions> = {}): ServiceClient {
  return new ServiceClient({ baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...options });
}

export type FlowNode = Record<string, unknown> & { id: string; type: string };

/** A config node for the simulator plus the given nodes, and credentials for helper.load. */
export function flowFor(sim: ChargingServiceSimulator, nodes: FlowNode[], service: Record<string, unknown> = {}): { flow: FlowNode[]; credentials: Record<string, unknown> } {
  const flow: FlowNode[] = [
    { id: 'f1', type: 'tab', label: 'test' },
    { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: 'sessions:write sessions:read', timeout: 5, maxInFlight: 8, ...service },
    ...nodes.map((n) => ({ z: 'f1', ...n })),
  ];
  return { flow, credentials: { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } } };
}

export async function load(sim: ChargingServiceSimulator, nodes: FlowNode[], service: Record<string, unknown> = {}, credentials?: Record<string, unknown>): Promise<void> {
  const f = flowFor(sim, nodes, service);
  await helper.load(NODES, f.flow, credentials ?? f.credentials);
  attachSinks(f.flow);
}

/**
 * The setup every runtime test file shares: one Node-RED runtime for the file,
 * a fresh simulator per test (rt.sim), flows unloaded after each test, and a
 * check that no test left an unhandled promise rejection behind.
 */
export function runtimeSuite(simOptions: SimulatorOptions = {}, settings?: Record<string, unknown>): { sim: ChargingServiceSimulator } {
  const rt = {} as { sim: ChargingServiceSimulator };
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  before((done) => {
    process.on('unhandledRejection', onUnhandled);
    if (settings) helper.settings(settings);
    helper.startServer(done);
  });
  after((done) => {
    process.off('unhandledRejection', onUnhandled);
    if (settings) helper.settings({});
    helper.stopServer(done);
  });
  beforeEach(async () => {
    unhandled.length = 0;
    rt.sim = await startSimulator(simOptions);
  });
  afterEach(async () => {
    await helper.unload();
    await rt.sim.stop();
    if (unhandled.length > 0) throw new Error(`unhandled promise rejection: ${unhandled.map(String).join('; ')}`);
  });
  return rt;
}

/** A Sink on every helper node of a loaded flow, before anything is sent, so that no message passes uncaught. */
export function attachSinks(flow: Array<{ id: string; type: string }>): void {
  for (const n of flow) if (n.type === 'helper') Sink.of(n.id);
}

export interface Received {
  msg: Record<string, unknown>;
}

/** Every message a helper node receives, in order, and a way to wait for the next ones. */
export class Sink {
  readonly messages: Array<Record<string, unknown>> = [];
  private waiters: Array<{ n: number; resolve: () => void }> = [];

  constructor(readonly node: Node) {
    node.on('input', (msg: Record<string, unknown>) => {
      this.messages.push(msg);
      this.waiters = this.waiters.filter((w) => {
        if (this.messages.length >= w.n) {
          w.resolve();
          return false;
        }
        return true;
      });
    });
  }

  private static readonly byNode = new WeakMap<Node, Sink>();

  /** The one sink for a helper node of the loaded flow (created on first use). */
  static of(id: string): Sink {
    const node = helper.getNode(id);
    let sink = Sink.byNode.get(node);
    if (!sink) {
      sink = new Sink(node);
      Sink.byNode.set(node, sink);
    }
    return sink;
  }

  /** Resolves with the n-th message (1-based), failing after timeoutMs. */
  async nth(n: number, timeoutMs = 5000): Promise<Record<string, unknown>> {
    if (this.messages.length < n) {
      await new Promise<void>((resolve, reject) => {
        const t = realSetTimeout(() => reject(new Error(`timed out waiting for message ${n} at ${this.node.id} (got ${this.messages.length})`)), timeoutMs);
        this.waiters.push({
          n,
          resolve: () => {
            realClearTimeout(t);
            resolve();
          },
        });
      });
    }
    return this.messages[n - 1];
  }

  next(timeoutMs = 5000): Promise<Record<string, unknown>> {
    return this.nth(this.messages.length + 1, timeoutMs);
  }
}

export function send(id: string, msg: Record<string, unknown>): void {
  (helper.getNode(id) as Node & { receive(m: unknown): void }).receive(msg);
}

// The real timers and clock, captured before any test fakes them (sinon), so that waiting for
// real sockets works while a test drives the client's timers by hand.
const realSetTimeout = setTimeout;
const realClearTimeout = clearTimeout;
const realNow = () => performance.now();

export function delay(ms: number): Promise<void> {
  return new Promise((r) => realSetTimeout(r, ms));
}

/**
 * Advances a fake clock in steps, letting real I/O (sockets to the simulator)
 * happen between steps, until done() holds. Fails after maxSteps.
 */
export async function driveClock(clock: { tickAsync(ms: number): Promise<unknown> }, done: () => boolean, stepMs: number, maxSteps = 1000): Promise<void> {
  for (let i = 0; i < maxSteps; i++) {
    if (done()) return;
    await delay(2);
    if (done()) return;
    await clock.tickAsync(stepMs);
  }
  throw new Error(`not done after ${maxSteps} steps of ${stepMs} ms`);
}

/** Everything Node-RED logged during the test, as text. */
export function loggedText(): string {
  const spy = helper.log();
  return spy ? JSON.stringify(spy.args.map((a) => a.map((x: unknown) => (x instanceof Error ? `${x.message} ${x.stack}` : x)))) : '';
}

/** Every status object every node set during the test, as text. */
export function statusCalls(nodeId?: string): Array<Record<string, unknown>> {
  // The helper wraps Node.prototype.status in a sinon spy while a flow is loaded.
  const calls = NODE_PROTO.status.getCalls ? NODE_PROTO.status.getCalls() : [];
  return calls.filter((c) => !nodeId || c.thisValue.id === nodeId).map((c) => c.args[0] as Record<string, unknown>);
}

/** Waits until cond() is true, polling; fails with the message after timeoutMs. */
export async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = realNow() + timeoutMs;
  while (!cond()) {
    if (realNow() > end) throw new Error(`timed out waiting for ${what}`);
    await delay(10);
  }
}

/** The ChargingError a promise rejects with; fails if it resolves or rejects with anything else. */
export async function rejection(p: Promise<unknown>): Promise<ChargingError> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof ChargingError)) throw new Error(`expected a ChargingError, got ${String(e)}`);
    return e;
  }
  throw new Error('expected a rejection');
}

/** A loopback port with nothing listening on it (connections are refused). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export function assertNoSecret(text: string, secrets: string[], where: string): void {
  for (const s of secrets) {
    if (s && text.includes(s)) throw new Error(`a secret appeared in ${where}`);
  }
}
