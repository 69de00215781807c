/**
 * One cold start, in a fresh process (bench/run.ts spawns it): require + init +
 * start of Node-RED until the flows run, "with" this package (one configuration
 * and one progress node deployed) or "without" it (no flows, core nodes only).
 * Prints one JSON line: time since the process started, CPU, heap after GC,
 * whether the proxy agents were loaded, how many of our modules were.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

async function main(): Promise<void> {
  const withPackage = process.argv[2] === 'with';
  const root = path.join(__dirname, '..', '..');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-cold-'));
  const flows: unknown[] = [];
  if (withPackage) {
    const name = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string }).name;
    const link = path.join(dir, 'node_modules', ...name.split('/'));
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(root, link, 'dir');
    flows.push(
      { id: 'tab', type: 'tab', label: 'cold' },
      { id: 'svc', type: 'charging-service', baseUrl: 'http://127.0.0.1:9', authUrl: 'http://127.0.0.1:9/auth', scope: '' },
      { id: 'p', type: 'charging-progress', z: 'tab', service: 'svc', wires: [[]] },
    );
    fs.writeFileSync(path.join(dir, 'flows_cred.json'), JSON.stringify({ svc: { clientId: 'cold', clientSecret: 'cold-secret' } }));
  }
  fs.writeFileSync(path.join(dir, 'flows.json'), JSON.stringify(flows));
  /* eslint-disable @typescript-eslint/no-require-imports */
  const RED = require('node-red');
  const express = require(require.resolve('express', { paths: [require.resolve('node-red')] }));
  /* eslint-enable @typescript-eslint/no-require-imports */
  const app = express();
  const server = http.createServer(app);
  RED.init(server, { userDir: dir, flowFile: 'flows.json', credentialSecret: false, httpAdminRoot: '/', logging: { console: { level: 'off' } }, diagnostics: { enabled: false }, telemetry: { enabled: false }, editorTheme: { tours: false } });
  app.use('/', RED.httpAdmin);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  await RED.start();
  for (let i = 0; withPackage && i < 1000 && !RED.nodes.getNode('p'); i++) await new Promise((r) => setTimeout(r, 5));
  const ms = performance.now();
  const cpu = process.cpuUsage();
  global.gc?.();
  const heapMiB = process.memoryUsage().heapUsed / 1048576;
  const loaded = Object.keys(require.cache);
  // Our copies (top-level); core's mqtt/websocket nodes and axios load nested copies of their own.
  const ours = ['http-proxy-agent', 'https-proxy-agent'].map((m) => path.join(root, 'node_modules', m) + path.sep);
  // Their code, that is: Node-RED's registry reads every module's package.json while it scans.
  const proxyAgents = loaded.some((k) => k.endsWith('.js') && ours.some((o) => k.startsWith(o)));
  const ourModules = loaded.filter((k) => k.startsWith(path.join(root, 'dist', 'nodes'))).length;
  console.log(JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, heapMiB, proxyAgents, ourModules }));
  await RED.stop();
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

void main();
