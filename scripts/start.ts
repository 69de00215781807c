/**
 * `npm start`: the bundled simulator plus Node-RED on http://127.0.0.1:1880 with
 * these nodes installed and the demo flow deployed. Node-RED gets the simulator's
 * address and credentials as environment variables (CHARGING_BASE_URL, …), which
 * the demo's and the examples' configurations read: nothing to type, nothing
 * secret in the flow files. Everything Node-RED writes lives in .node-red-data/
 * (CHARGING_DATA_DIR to put it elsewhere).
 *
 *   npm start                                  keep your edits to the demo flow between runs
 *   npm start -- --reset                       write the demo flow afresh
 *   npm start -- --fault get:status:503:3      any charging-simulator option (faults, --auth-method, …)
 *   PORT=1881 SIM_PORT=18081 npm start        (or npm start -- --port 18081 for the simulator)
 *   npm start -- --replicas 2                  two Node-RED replicas (PORT, PORT+1) coordinated through
 *                                              a Redis of their own (Debian's redis-server);
 *                                              CHARGING_COORDINATION=redis://… to use your Redis instead
 *   npm start -- --replicas 2 --sentinel       the same on Redis Sentinel: a primary, a replica and three
 *                                              sentinels (redis-server processes), a redis-sentinel:// URL;
 *                                              fail it over and watch the replicas follow
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import { ChargingServiceSimulator } from '../simulator/simulator';
import { HELP as SIMULATOR_HELP, parseArgs } from '../simulator/cli';
import { redisServerPath, startRedis, startSentinel } from './start-redis';

const root = path.resolve(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string };
const DEMOS = ['01 Start, follow and stop a session.json', '05 Charging monitor (watch mode).json'].map((f) => path.join(root, 'examples', f));
const DASHBOARD_DEMO = path.join(root, 'examples', '11 Charging dashboard.json');

/** Dashboard 2.0 from this repo's node_modules (a devDependency), or null when it is not installed. */
export function dashboardDir(): string | null {
  try {
    return path.dirname(require.resolve('@flowfuse/node-red-dashboard/package.json', { paths: [root] }));
  } catch {
    return null;
  }
}

async function main(): Promise<void> {
  const dataDir = process.env.CHARGING_DATA_DIR ? path.resolve(process.env.CHARGING_DATA_DIR) : path.join(root, '.node-red-data');
  const uiPort = Number(process.env.PORT ?? 1880);
  const args = process.argv.slice(2);
  const reset = args.includes('--reset');
  let parsed;
  let replicas: number | null;
  const sentinel = args.includes('--sentinel');
  try {
    if (sentinel && !args.some((a) => /^--replicas/.test(a))) throw new Error('--sentinel goes with --replicas N');
    const taken = replicasOption(args.filter((a) => a !== '--reset' && a !== '--sentinel'));
    replicas = taken.replicas;
    parsed = parseArgs(taken.rest);
  } catch (err) {
    console.error(`${(err as Error).message}\n\nnpm start -- [--reset] [--replicas N [--sentinel]] [simulator options]\n${SIMULATOR_HELP}`);
    process.exit(2);
  }
  // Before anything starts: a fleet needs a Redis, and a clear word when there is none.
  const redisBin = replicas !== null && !process.env.CHARGING_COORDINATION ? redisServerPath() : null;
  if (replicas !== null && !process.env.CHARGING_COORDINATION && !redisBin) {
    console.error('--replicas needs Redis: redis-server is not installed (apt-get install redis-server), or set CHARGING_COORDINATION=redis://host:port to use a Redis of your own.');
    process.exit(1);
  }
  const simPort = Number(process.env.SIM_PORT ?? parsed.options.port ?? 18080);
  const sim = new ChargingServiceSimulator({ startDelayMs: 2000, stopDelayMs: 2000, ...parsed.options, port: simPort });
  try {
    await sim.start();
  } catch (err) {
    console.error(`Could not start the simulator on 127.0.0.1:${simPort} (${(err as Error).message}). Is another npm start running? Set SIM_PORT to use another port.`);
    process.exit(1);
  }
  for (const f of parsed.faults) sim.inject(f);
  const mqttPort = await startMqttBroker();

  const o = sim.options;
  console.log(`Simulator: base URL  ${sim.baseUrl}
           token URL ${sim.authUrl}
           client    ${o.clientId} / ${o.clientSecret} (${o.authMethod})${parsed.faults.length ? `\n           faults    ${parsed.faults.length} armed` : ''}
           faults at run time: curl -X POST ${sim.baseUrl}/__sim/faults -d '{"target":"get","kind":"status","status":503,"times":3}'
MQTT:      broker on 127.0.0.1:${mqttPort} (CHARGING_MQTT_HOST/PORT, for example 06); import example 06 and publish a surplus to watch the car start:
           mosquitto_pub -p ${mqttPort} -t home/solar/surplus_w -m 4200      (or any MQTT client)
Dashboard: ${dashboardDir() ? `http://127.0.0.1:${uiPort}/dashboard  (example 11, Dashboard 2.0)` : 'not installed (npm install)'}`);
  const env = { ...simulatorEnv(sim), CHARGING_MQTT_HOST: '127.0.0.1', CHARGING_MQTT_PORT: String(mqttPort) };
  if (replicas !== null) {
    await startReplicas({ count: replicas, dataDir, uiPort, reset, env, redisBin, sentinel, stopSim: () => sim.stop() });
    return;
  }
  prepareUserDir(dataDir, uiPort, reset ? 'reset' : 'keep');
  console.log(`Node-RED:  http://127.0.0.1:${uiPort}/  (user dir ${path.relative(root, dataDir)}/; configurations read ${Object.keys(simulatorEnv(sim)).join(', ')})`);

  // Example 10 appends ended sessions to this file: the demo's own user dir, not ~/.node-red.
  const sessionLog = process.env.CHARGING_SESSION_LOG ?? path.join(dataDir, 'charging-sessions.csv');
  const red = spawnNodeRed(dataDir, uiPort, 'inherit', undefined, { ...env, CHARGING_SESSION_LOG: sessionLog, CHARGING_LEDGER_DIR: process.env.CHARGING_LEDGER_DIR ?? dataDir });
  const stop = (signal: NodeJS.Signals) => {
    red.kill(signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  red.on('exit', (code) => {
    void sim.stop().then(() => process.exit(code ?? 0));
  });
}

/** `--replicas N` (or `--replicas=N`) taken out of the arguments; the rest go to the simulator. */
export function replicasOption(args: string[]): { replicas: number | null; rest: string[] } {
  const rest: string[] = [];
  let replicas: number | null = null;
  for (let i = 0; i < args.length; i++) {
    const m = /^--replicas(?:=(.*))?$/.exec(args[i]);
    if (!m) {
      rest.push(args[i]);
      continue;
    }
    const value = m[1] ?? args[++i];
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 9) throw new Error(`--replicas takes a number of Node-RED replicas from 1 to 9, not ${value ?? 'nothing'}`);
    replicas = n;
  }
  return { replicas, rest };
}

/** The env variable the replicas' configurations read *Coordinate replicas* from. */
export const COORDINATION_ENV = 'CHARGING_COORDINATION';

/**
 * Each replica's user dir: the demo as npm start writes it, credentials kept
 * in plain text (credentialSecret false: they hold no secret, only
 * `${CHARGING_COORDINATION}`, set on every charging-service configuration of
 * the flows, the user's own included).
 */
export function prepareReplicaDir(dataDir: string, uiPort: number, reset: boolean): void {
  prepareUserDir(dataDir, uiPort, reset ? 'reset' : 'keep', '    credentialSecret: false,');
  const flows = JSON.parse(fs.readFileSync(path.join(dataDir, 'flows.json'), 'utf8')) as Array<{ id: string; type: string }>;
  const credFile = path.join(dataDir, 'flows_cred.json');
  let creds: Record<string, Record<string, unknown>> = {};
  try {
    const kept = JSON.parse(fs.readFileSync(credFile, 'utf8')) as Record<string, Record<string, unknown>>;
    if (!('$' in kept)) creds = kept;
  } catch {
    // none yet
  }
  for (const n of flows) if (n.type === 'charging-service') creds[n.id] = { ...creds[n.id], coordination: `\${${COORDINATION_ENV}}` };
  fs.writeFileSync(credFile, JSON.stringify(creds, null, 2));
}

interface FleetStart {
  count: number;
  dataDir: string;
  uiPort: number;
  reset: boolean;
  env: Record<string, string>;
  /** null: CHARGING_COORDINATION names the user's Redis */
  redisBin: string | null;
  /** a Sentinel deployment of its own rather than one redis-server */
  sentinel: boolean;
  stopSim: () => Promise<void>;
}

/**
 * `--replicas N`: a Redis (unless CHARGING_COORDINATION names one), then N
 * Node-RED processes on PORT, PORT+1, … each with its own user dir
 * (replica-1, …) and the demo coordinated through that Redis. A replica that
 * exits (killed to watch the others take over) leaves the rest running;
 * Ctrl-C stops all.
 */
async function startReplicas(f: FleetStart): Promise<void> {
  const redis = f.redisBin ? await (f.sentinel ? startSentinel(f.redisBin) : startRedis(f.redisBin)) : null;
  const url = redis?.url ?? String(process.env.CHARGING_COORDINATION);
  const shown = url.replace(/\/\/[^@/]*@/, '//***@').replace(/([?&]sentinelPassword=)[^&]*/, '$1***');
  console.log(`Redis:     ${redis ? `${shown}\n           (${redis.about})` : `${shown} (CHARGING_COORDINATION)`}`);
  const reds: ChildProcess[] = [];
  for (let i = 0; i < f.count; i++) {
    const dir = path.join(f.dataDir, `replica-${i + 1}`);
    const port = f.uiPort + i;
    prepareReplicaDir(dir, port, f.reset);
    const red = spawnNodeRed(dir, port, 'pipe', undefined, { ...f.env, [COORDINATION_ENV]: url, CHARGING_SESSION_LOG: process.env.CHARGING_SESSION_LOG ?? path.join(dir, 'charging-sessions.csv'), CHARGING_LEDGER_DIR: process.env.CHARGING_LEDGER_DIR ?? dir });
    prefixLines(red, `[replica-${i + 1}] `);
    reds.push(red);
    const shownDir = path.relative(root, dir).startsWith('..') ? dir : path.relative(root, dir);
    console.log(`Replica ${i + 1}: http://127.0.0.1:${port}/  (pid ${red.pid}, user dir ${shownDir}/)`);
  }
  console.log(`Fleet:     ${f.count} replicas of the demo, every charging-service configuration coordinated through Redis (${COORDINATION_ENV}).
           Kill one to watch the others take its watched sessions over (within about 10 s): kill -9 ${reds[0].pid}
           Ctrl-C stops all.`);
  let stopping = false;
  const stopAll = (signal: NodeJS.Signals) => {
    stopping = true;
    for (const r of reds) if (r.exitCode === null && r.signalCode === null) r.kill(signal);
  };
  process.on('SIGINT', () => stopAll('SIGINT'));
  process.on('SIGTERM', () => stopAll('SIGTERM'));
  let running = reds.length;
  reds.forEach((red, i) => {
    red.on('exit', (code, signal) => {
      running--;
      if (!stopping) console.log(`Replica ${i + 1} (pid ${red.pid}) exited (${signal ?? `code ${code}`}); ${running} still running.`);
      if (running > 0) return;
      // Redis gone before npm start ends: nothing left behind on its ports.
      const alive = (redis?.procs ?? []).filter((p) => p.exitCode === null && p.signalCode === null);
      const redisExit = Promise.all(alive.map((p) => new Promise((r) => p.once('exit', r))));
      for (const p of alive) p.kill('SIGTERM');
      void Promise.all([redisExit, f.stopSim()]).then(() => process.exit(0));
    });
  });
}

/** A child's output on this console, each line prefixed with the replica's name. */
function prefixLines(child: ChildProcess, prefix: string): void {
  for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]] as const) {
    let rest = '';
    from?.on('data', (d: Buffer) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) to.write(`${prefix}${line}\n`);
    });
    from?.on('end', () => {
      if (rest) to.write(`${prefix}${rest}\n`);
    });
  }
}

/** The environment the demo and the examples read their configuration from (see README, "Configuration from the environment"). */
export function simulatorEnv(sim: ChargingServiceSimulator): Record<string, string> {
  return {
    CHARGING_BASE_URL: sim.baseUrl,
    CHARGING_AUTH_URL: sim.authUrl,
    CHARGING_CLIENT_ID: sim.options.clientId,
    CHARGING_CLIENT_SECRET: sim.options.clientSecret,
  };
}

/** Node-RED (this repo's, or the red.js given) on the given user dir, with this process's Node. */
export function spawnNodeRed(
  dataDir: string,
  uiPort: number,
  stdio: 'inherit' | 'pipe' = 'pipe',
  redJs = require.resolve('node-red/red.js', { paths: [root] }),
  env: Record<string, string> = {},
): ChildProcess {
  return spawn(process.execPath, [redJs, '--userDir', dataDir, '--port', String(uiPort)], { cwd: root, stdio, env: { ...process.env, ...env } });
}

/**
 * An in-process MQTT broker (aedes, a devDependency) for example 06, on the first
 * free port from 1883 up, so that a newcomer needs no broker of their own.
 */
async function startMqttBroker(): Promise<number> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Aedes } = require('aedes') as { Aedes: { createBroker(): Promise<{ handle: (s: net.Socket) => void }> } };
  const broker = await Aedes.createBroker();
  for (let port = 1883; ; port++) {
    const server = net.createServer(broker.handle);
    const ok = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (ok) {
      server.unref(); // Node-RED's exit ends npm start, as before
      return port;
    }
    if (port >= 1983) throw new Error('no free port for the MQTT broker in 1883-1983');
  }
}

/**
 * The demo: examples 01 and 05 (and 11, the dashboard, when Dashboard 2.0 is
 * installed) as npm start deploys them, every id prefixed with "demo-" so that
 * importing the same examples from the library next to it asks no "nodes already
 * exist" question, and their own RFID tokens and locations (E01-RFID-1 becomes
 * DEMO-RFID-1, E05-… MON-…, E11-… DASH-…) so that an imported copy does not
 * compete with the demo for the same connector. The demo's dashboard page is
 * /charging-demo: an imported example 11 brings its own page (/charging); its
 * ui-base is dropped by Dashboard 2.0's editor, which keeps one per Node-RED.
 */
export function demoFlow(): Array<Record<string, unknown>> {
  const files = dashboardDir() ? [...DEMOS, DASHBOARD_DEMO] : DEMOS;
  const text = (f: string) => fs.readFileSync(f, 'utf8').replace(/\bE01-/g, 'DEMO-').replace(/\bE05-/g, 'MON-').replace(/\bE11-/g, 'DASH-');
  const flow = files.flatMap((f) => JSON.parse(text(f)) as Array<Record<string, unknown>>);
  for (const n of flow) if (n.type === 'ui-page') Object.assign(n, { name: `${n.name as string} demo`, path: `${n.path as string}-demo` });
  const ids = new Set(flow.map((n) => n.id as string));
  const rename = (v: unknown): unknown => {
    if (typeof v === 'string') return ids.has(v) ? `demo-${v}` : v;
    if (Array.isArray(v)) return v.map(rename);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'info' || k === 'name' ? x : rename(x)]));
    return v;
  };
  return flow.map((n) => rename(n) as Record<string, unknown>);
}

/**
 * A Node-RED user dir with this package linked in, demo settings (and
 * `extraSettings`, lines added to them), and the demo flows written afresh
 * ('reset'), the user's flows kept ('keep'), or no flows at all ('empty', for
 * the editor test).
 */
export function prepareUserDir(dataDir: string, uiPort: number, flows: 'reset' | 'keep' | 'empty', extraSettings = ''): void {
  fs.mkdirSync(path.join(dataDir, 'node_modules', ...pkg.name.split('/').slice(0, -1)), { recursive: true });
  // Install this package into the user dir the way `npm install <path>` would: a link.
  const link = path.join(dataDir, 'node_modules', ...pkg.name.split('/'));
  if (!fs.existsSync(link)) fs.symlinkSync(root, link, 'dir');
  const dependencies: Record<string, string> = { [pkg.name]: `file:${root}` };
  // Dashboard 2.0 the same way, from this repo's node_modules: Node-RED 4 and 5 load
  // the modules in the user dir's node_modules, and the link resolves its own
  // dependencies from where it really lives.
  const dashboard = dashboardDir();
  if (dashboard) {
    fs.mkdirSync(path.join(dataDir, 'node_modules', '@flowfuse'), { recursive: true });
    const dashLink = path.join(dataDir, 'node_modules', '@flowfuse', 'node-red-dashboard');
    if (!fs.existsSync(dashLink)) fs.symlinkSync(dashboard, dashLink, 'dir');
    dependencies['@flowfuse/node-red-dashboard'] = `file:${dashboard}`;
  }
  fs.writeFileSync(path.join(dataDir, 'package.json'), JSON.stringify({ name: 'node-red-project', private: true, dependencies }, null, 2));
  fs.writeFileSync(
    path.join(dataDir, 'settings.js'),
    `// Written by npm start: demo settings for this machine only (no admin login, editor on 127.0.0.1).
module.exports = {
    flowFile: 'flows.json',
    uiHost: '127.0.0.1',
    uiPort: ${uiPort},
    flowFilePretty: true,
    diagnostics: { enabled: false },
    telemetry: { enabled: false },
    externalModules: { autoInstall: false, palette: { allowInstall: false }, modules: { allowInstall: false } },
    editorTheme: { projects: { enabled: false }, tours: false },
    logging: { console: { level: 'info', metrics: false, audit: false } },
    // "file" keeps what a store is asked to keep across restarts (a watch node's Keep state in).
    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem' } },${extraSettings ? `\n${extraSettings}` : ''}
};
`,
  );
  const flowFile = path.join(dataDir, 'flows.json');
  if (flows === 'empty') {
    fs.writeFileSync(flowFile, '[]');
  } else if (flows === 'reset' || !fs.existsSync(flowFile)) {
    fs.writeFileSync(flowFile, JSON.stringify(demoFlow(), null, 2));
  }
}

if (require.main === module) void main();
