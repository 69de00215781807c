/**
 * A real Node-RED for the benchmark, in this process: runtime, editor API and
 * comms (the websocket an open editor tab holds), this package installed in
 * its user directory, flows deployed through POST /flows as the editor deploys
 * them. Not the test helper: it has no editor connection and wraps Node's
 * methods in sinon spies, so it would measure neither status traffic nor Node-RED.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Node } from 'node-red';

/* eslint-disable @typescript-eslint/no-require-imports */
const RED = require('node-red') as {
  init(server: http.Server, settings: Record<string, unknown>): void;
  start(): Promise<void>;
  stop(): Promise<void>;
  httpAdmin: http.RequestListener;
  httpNode: http.RequestListener;
  nodes: { getNode(id: string): Node | null };
};
const express = require(require.resolve('express', { paths: [require.resolve('node-red')] })) as () => http.RequestListener & { use(path: string, h: unknown): void };
const WebSocket = require(require.resolve('ws', { paths: [require.resolve('node-red')] })) as new (url: string) => WsClient;
/* eslint-enable @typescript-eslint/no-require-imports */

interface WsClient {
  on(event: 'open' | 'close', fn: () => void): void;
  on(event: 'message', fn: (data: Buffer | string) => void): void;
  send(data: string): void;
  close(): void;
}

export type AnyNode = Node & { receive(msg: unknown): void };
export type FlowNode = Record<string, unknown> & { id: string; type: string };

/** The watch benchmark's flow: one watch node per context store (w-mem, w-file), idle until tokens are sent to them, into a sink. */
export function watchFlow(base: string, intervalSec: number): FlowNode[] {
  return [
    { id: 'tab', type: 'tab', label: 'watch' },
    { id: 'svc', type: 'charging-service', baseUrl: base, authUrl: `${base}/auth`, scope: '', timeout: 10, credentials: { clientId: 'bench', clientSecret: 'bench-secret' } },
    { id: 'w-mem', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: intervalSec, wires: [['sink']] },
    { id: 'w-file', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: intervalSec, contextStore: 'file', wires: [['sink']] },
    // The 'nodered' contender: bare axios, each record sent on from this minimal node (what any node that emits one message per poll pays).
    { id: 'floor', type: 'bench-minimal', z: 'tab', wires: [['sink']] },
    { id: 'sink', type: 'bench-sink', z: 'tab' },
  ];
}

const ROOT = path.join(__dirname, '..', '..');
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string };

/** The sink at the end of every benchmark flow: hands each message to the benchmark, then done(). */
const SINK_JS = `module.exports = function (RED) {
  function BenchSink(config) {
    RED.nodes.createNode(this, config);
    this.on('input', function (msg, send, done) { global.__benchSink(msg); done(); });
  }
  RED.nodes.registerType('bench-sink', BenchSink);
};`;
const SINK_HTML = `<script type="text/javascript">RED.nodes.registerType('bench-sink', { category: 'function', defaults: {}, inputs: 1, outputs: 0 });</script>`;

/**
 * The floor for any node: the (a0) call made inside a minimal Node-RED node
 * (global.__benchA0 is set by the benchmark), its result sent on. What Node-RED
 * itself costs per message, on top of the HTTP call, shows as (n) vs (a0).
 */
const MINIMAL_JS = `module.exports = function (RED) {
  function BenchMinimal(config) {
    RED.nodes.createNode(this, config);
    this.on('input', function (msg, send, done) {
      global.__benchA0(msg.payload.token).then(function (record) { msg.payload = record; send(msg); done(); }, done);
    });
  }
  RED.nodes.registerType('bench-minimal', BenchMinimal);
};`;
const MINIMAL_HTML = `<script type="text/javascript">RED.nodes.registerType('bench-minimal', { category: 'function', defaults: {}, inputs: 1, outputs: 1 });</script>`;

export class EmbeddedNodeRed {
  private constructor(
    readonly base: string,
    private readonly server: http.Server,
    readonly dir: string,
  ) {}

  /** Boots Node-RED on a free loopback port with this package installed. */
  static async start(extraSettings: Record<string, unknown> = {}): Promise<EmbeddedNodeRed> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-bench-'));
    const nodesDir = path.join(dir, 'bench-nodes');
    fs.mkdirSync(nodesDir);
    fs.writeFileSync(path.join(nodesDir, 'bench-sink.js'), SINK_JS);
    fs.writeFileSync(path.join(nodesDir, 'bench-sink.html'), SINK_HTML);
    fs.writeFileSync(path.join(nodesDir, 'bench-minimal.js'), MINIMAL_JS);
    fs.writeFileSync(path.join(nodesDir, 'bench-minimal.html'), MINIMAL_HTML);
    const link = path.join(dir, 'node_modules', ...PKG.name.split('/'));
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(ROOT, link, 'dir');
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'bench', private: true, dependencies: { [PKG.name]: `file:${ROOT}` } }));
    fs.writeFileSync(path.join(dir, 'flows.json'), '[]');

    const app = express();
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    RED.init(server, {
      userDir: dir,
      flowFile: 'flows.json',
      credentialSecret: false,
      httpAdminRoot: '/',
      httpNodeRoot: '/api',
      uiHost: '127.0.0.1',
      uiPort: port,
      nodesDir: [nodesDir],
      logging: { console: { level: 'warn', metrics: false, audit: false } },
      diagnostics: { enabled: false },
      telemetry: { enabled: false },
      editorTheme: { tours: false, projects: { enabled: false } },
      externalModules: { autoInstall: false, palette: { allowInstall: false } },
      ...extraSettings,
    });
    app.use('/', RED.httpAdmin);
    app.use('/api', RED.httpNode); // http in routes (httpNodeRoot)
    await RED.start();
    return new EmbeddedNodeRed(`http://127.0.0.1:${port}/`, server, dir);
  }

  /** A full deploy of `flow`, as the editor's Deploy button sends it (credentials inside the config nodes). */
  async deploy(flow: FlowNode[]): Promise<void> {
    const res = await fetch(`${this.base}flows`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Node-RED-Deployment-Type': 'full', 'Node-RED-API-Version': 'v1' },
      body: JSON.stringify(flow),
    });
    if (res.status >= 300) throw new Error(`deploy failed: ${res.status} ${await res.text()}`);
    for (let i = 0; i < 500; i++) {
      if (flow.every((n) => n.type === 'tab' || RED.nodes.getNode(n.id))) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('deployed nodes did not start');
  }

  node(id: string): AnyNode {
    const n = RED.nodes.getNode(id);
    if (!n) throw new Error(`no node ${id}`);
    return n as AnyNode;
  }

  /** Every message that reaches a bench-sink node. */
  onSink(fn: (msg: Record<string, unknown>) => void): void {
    (global as unknown as { __benchSink: typeof fn }).__benchSink = fn;
  }

  /** An editor tab's connection: the comms websocket, subscribed to status updates as the editor is. */
  async editor(): Promise<{ statusUpdates(): number; close(): void }> {
    const ws = new WebSocket(`${this.base.replace('http', 'ws')}comms`);
    let updates = 0;
    ws.on('message', (data) => {
      try {
        const batch = JSON.parse(String(data)) as Array<{ topic?: string }>;
        if (Array.isArray(batch)) for (const m of batch) if (m.topic?.startsWith('status/')) updates++;
      } catch {
        // not a batch
      }
    });
    await new Promise<void>((r) => ws.on('open', () => r()));
    ws.send(JSON.stringify({ subscribe: 'status/#' }));
    return { statusUpdates: () => updates, close: () => ws.close() };
  }

  async stop(): Promise<void> {
    await RED.stop();
    await new Promise<void>((r) => this.server.close(() => r()));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
