/**
 * `npm start`: the bundled simulator plus Node-RED on http://127.0.0.1:1880 with
 * these nodes installed and the demo flow deployed, credentials included.
 * Everything Node-RED writes lives in .node-red-data/ (git-ignored).
 *
 *   npm start                 keep your edits to the demo flow between runs
 *   npm start -- --reset      write the demo flow afresh
 *   PORT=1881 SIM_PORT=18081 npm start
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import { ChargingServiceSimulator } from '../simulator/simulator';

const root = path.resolve(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string };
const DEMOS = ['01 Start, follow and stop a session.json', '05 Charging monitor (watch mode).json'].map((f) => path.join(root, 'examples', f));

async function main(): Promise<void> {
  const dataDir = path.join(root, '.node-red-data');
  const uiPort = Number(process.env.PORT ?? 1880);
  const simPort = Number(process.env.SIM_PORT ?? 18080);
  const reset = process.argv.includes('--reset');
  const sim = new ChargingServiceSimulator({ port: simPort, startDelayMs: 2000, stopDelayMs: 2000 });
  try {
    await sim.start();
  } catch (err) {
    console.error(`Could not start the simulator on 127.0.0.1:${simPort} (${(err as Error).message}). Is another npm start running? Set SIM_PORT to use another port.`);
    process.exit(1);
  }
  prepareUserDir(dataDir, uiPort, sim, reset ? 'reset' : 'keep');

  console.log(`Simulator: ${sim.baseUrl} (client ${sim.options.clientId} / ${sim.options.clientSecret})`);
  console.log(`Node-RED:  http://127.0.0.1:${uiPort}/  (user dir ${path.relative(root, dataDir)}/)`);

  const red = spawnNodeRed(dataDir, uiPort, 'inherit');
  const stop = (signal: NodeJS.Signals) => {
    red.kill(signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  red.on('exit', (code) => {
    void sim.stop().then(() => process.exit(code ?? 0));
  });
}

/** Node-RED (this repo's, or the red.js given) on the given user dir, with this process's Node. */
export function spawnNodeRed(dataDir: string, uiPort: number, stdio: 'inherit' | 'pipe' = 'pipe', redJs = require.resolve('node-red/red.js', { paths: [root] })): ChildProcess {
  return spawn(process.execPath, [redJs, '--userDir', dataDir, '--port', String(uiPort)], { cwd: root, stdio });
}

/**
 * A Node-RED user dir with this package linked in, demo settings, and the demo
 * flows with the simulator's credentials ('reset'), the user's flows kept
 * ('keep'), or no flows at all ('empty', for the editor test).
 */
export function prepareUserDir(dataDir: string, uiPort: number, sim: ChargingServiceSimulator, flows: 'reset' | 'keep' | 'empty'): void {
  const reset = flows === 'reset';
  fs.mkdirSync(path.join(dataDir, 'node_modules', ...pkg.name.split('/').slice(0, -1)), { recursive: true });
  // Install this package into the user dir the way `npm install <path>` would: a link.
  const link = path.join(dataDir, 'node_modules', ...pkg.name.split('/'));
  if (!fs.existsSync(link)) fs.symlinkSync(root, link, 'dir');
  fs.writeFileSync(
    path.join(dataDir, 'package.json'),
    JSON.stringify({ name: 'node-red-project', private: true, dependencies: { [pkg.name]: `file:${root}` } }, null, 2),
  );
  fs.writeFileSync(
    path.join(dataDir, 'settings.js'),
    `// Written by npm start. Demo settings: credentials are stored unencrypted in flows_cred.json
// so that the demo works with nothing to type; do not use these settings in production.
module.exports = {
    flowFile: 'flows.json',
    credentialSecret: false,
    uiHost: '127.0.0.1',
    uiPort: ${uiPort},
    flowFilePretty: true,
    diagnostics: { enabled: false },
    telemetry: { enabled: false },
    externalModules: { autoInstall: false, palette: { allowInstall: false }, modules: { allowInstall: false } },
    editorTheme: { projects: { enabled: false }, tours: false },
    logging: { console: { level: 'info', metrics: false, audit: false } },
};
`,
  );
  const flowFile = path.join(dataDir, 'flows.json');
  if (flows === 'empty') {
    fs.writeFileSync(flowFile, '[]');
    fs.rmSync(path.join(dataDir, 'flows_cred.json'), { force: true });
  } else if (reset || !fs.existsSync(flowFile)) {
    const flow = DEMOS.flatMap((f) => JSON.parse(fs.readFileSync(f, 'utf8')) as Array<Record<string, unknown>>);
    const credentials: Record<string, unknown> = {};
    for (const n of flow) {
      if (n.type === 'charging-service') {
        n.baseUrl = sim.baseUrl;
        n.authUrl = sim.authUrl;
        credentials[String(n.id)] = { clientId: sim.options.clientId, clientSecret: sim.options.clientSecret };
      }
    }
    fs.writeFileSync(flowFile, JSON.stringify(flow, null, 2));
    fs.writeFileSync(path.join(dataDir, 'flows_cred.json'), JSON.stringify(credentials, null, 2));
  } else {
    // Keep the user's flow, but point configurations that use a simulator on this
    // machine at this run's simulator (SIM_PORT may differ from the last run).
    const flow = JSON.parse(fs.readFileSync(flowFile, 'utf8')) as Array<Record<string, unknown>>;
    let changed = false;
    for (const n of flow) {
      if (n.type === 'charging-service' && typeof n.baseUrl === 'string' && /^http:\/\/127\.0\.0\.1:\d+\/?$/.test(n.baseUrl) && n.baseUrl !== sim.baseUrl) {
        n.baseUrl = sim.baseUrl;
        n.authUrl = sim.authUrl;
        changed = true;
      }
    }
    if (changed) fs.writeFileSync(flowFile, JSON.stringify(flow, null, 2));
  }
}

if (require.main === module) void main();
