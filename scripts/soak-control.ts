/**
 * The control rotation of the soak (`npm run soak -- --rotation control`):
 * random wishes (on/off, now and then with msg.force or msg.restart) for N
 * connectors through one charging-control node in a real Node-RED runtime,
 * against the simulator with the soak's faults plus the station's own (a START
 * or a STOP accepted and not carried out), and a redeploy every 15 s. Then the
 * faults stop, each connector's last wish is sent once more (as a scheduler
 * re-sends it), and every connector must reach its wanted state.
 *
 * Fails (exit 1) on: a START that arrived while the token had a session (a
 * duplicate START), a wish with neither done nor Catch, an output that repeats
 * the previous state of its connector, a connector not in its wanted state
 * within the bound, a request after close, a secret in any message, a crash.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import helper from 'node-red-node-test-helper';
import type { Node } from 'node-red';
import { ChargingServiceSimulator } from '../simulator/simulator';
import { FAULTS, injectFaults, rng, STATION_FAULTS } from './soak-faults';

export interface ControlSoakArgs {
  seconds: number;
  connectors: number;
  seed: number;
  out: string | null;
}

const GUARD_S = 1;
const WAIT_S = 3;
const CHECK_S = 0.5;
/** Every connector must be in its wanted state within this, once the faults stop and the last wishes are sent again. */
const CONVERGE_MS = 30_000;
const REDEPLOY_EVERY_MS = 15_000;
const LEAK = /Bearer (?!\*\*\*)[A-Za-z0-9_-]{10,}|Basic (?!\*\*\*)[A-Za-z0-9+/=]{10,}/;

interface Target {
  locationId: string;
  evseId: string;
  token: string;
}
type RedNodes = { stopFlows(): Promise<void>; startFlows(): Promise<void> };

export async function soakControl(args: ControlSoakArgs): Promise<void> {
  const random = rng(args.seed);
  const crashes: string[] = [];
  process.on('uncaughtException', (e) => crashes.push(String(e?.stack ?? e)));
  process.on('unhandledRejection', (e) => crashes.push(String((e as Error)?.stack ?? e)));

  const sim = await new ChargingServiceSimulator({ startDelayMs: 30, stopDelayMs: 30, tokenLifetimeSec: 12, keepRequests: 0 }).start();
  helper.init(require.resolve('node-red'));
  helper.settings({ chargingSession: { minPollIntervalSec: 0.1 } } as Record<string, unknown>);
  await new Promise<void>((r) => helper.startServer(() => r()));
  /* eslint-disable @typescript-eslint/no-require-imports */
  const nodes = ['charging-service', 'charging-control'].map((n) => require(`../nodes/${n}`));
  /* eslint-enable @typescript-eslint/no-require-imports */
  const flow = [
    { id: 'f1', type: 'tab' },
    { id: 'svc', type: 'charging-service', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 1, maxInFlight: 16 },
    { id: 'ctl', type: 'charging-control', z: 'f1', service: 'svc', guard: GUARD_S, checkInterval: CHECK_S, waitTimeout: WAIT_S, startAttempts: 2, wires: [['out']] },
    { id: 'out', type: 'helper', z: 'f1' },
    { id: 'caught', type: 'helper', z: 'f1' },
    { id: 'catcher', type: 'catch', z: 'f1', scope: ['ctl'], uncaught: false, wires: [['caught']] },
    { id: 'completed', type: 'helper', z: 'f1' },
    { id: 'when-done', type: 'complete', z: 'f1', scope: ['ctl'], uncaught: false, wires: [['completed']] },
  ];
  await helper.load(nodes, flow, { svc: { clientId: sim.options.clientId, clientSecret: sim.options.clientSecret } });
  // The helper's sinon spies keep every call's arguments: restore the originals (the soak runs long).
  (helper as unknown as { _sandbox: { restore(): void } })._sandbox.restore();
  const red = (helper as unknown as { _redNodes: RedNodes })._redNodes;
  global.gc?.();
  const heapStart = process.memoryUsage().heapUsed;

  const targets: Target[] = Array.from({ length: args.connectors }, (_, i) => ({ locationId: 'SOAK-CTL', evseId: String(i + 1), token: `SOAK-CTL-${i + 1}` }));
  const lastWish = new Map<string, boolean>();
  const lastOutput = new Map<string, string>();
  const waiting = new Map<string, { timer: NodeJS.Timeout }>();
  const stats = { wishes: 0, forced: 0, restarts: 0, done: 0, caught: 0, lost: 0, outputs: 0, repeatedOutputs: 0, backgroundErrors: 0, leaks: 0, redeploys: 0, inFlightAtRedeploy: 0 };
  /** wishes in flight when a redeploy began: Node-RED's complete and catch nodes of the old flow are gone when they finish */
  const atRedeploy = new Set<string>();
  const errorsByCode: Record<string, number> = {};
  const backgroundByCode: Record<string, number> = {};
  const firstError = new Map<string, string>();
  const repeated: string[] = [];
  let seq = 0;

  const settle = (msg: Record<string, unknown>, ok: boolean) => {
    const id = msg._soakId as string | undefined;
    const error = msg.error as { code?: string; message?: string } | undefined;
    if (LEAK.test(JSON.stringify(msg)) || JSON.stringify(msg).includes(sim.options.clientSecret)) stats.leaks++;
    if (!id) {
      // A check that failed by itself (Catch with msg.target), once per streak.
      stats.backgroundErrors++;
      backgroundByCode[error?.code ?? '?'] = (backgroundByCode[error?.code ?? '?'] ?? 0) + 1;
      if (error?.code && !firstError.has(`background ${error.code}`)) firstError.set(`background ${error.code}`, error.message ?? '');
      return;
    }
    const w = waiting.get(id);
    if (!w) return;
    clearTimeout(w.timer);
    waiting.delete(id);
    if (ok) stats.done++;
    else {
      stats.caught++;
      errorsByCode[error?.code ?? '?'] = (errorsByCode[error?.code ?? '?'] ?? 0) + 1;
      if (error?.code && !firstError.has(error.code)) firstError.set(error.code, error.message ?? '');
    }
  };
  const onOutput = (msg: Record<string, unknown>) => {
    stats.outputs++;
    if (LEAK.test(JSON.stringify(msg))) stats.leaks++;
    const key = JSON.stringify(msg.target);
    const shown = `${String(msg.payload)}|${String(msg.wanted)}`;
    if (lastOutput.get(key) === shown) {
      stats.repeatedOutputs++;
      if (repeated.length < 5) repeated.push(`${key}: ${shown} (${String(msg.reason)})`);
    }
    lastOutput.set(key, shown);
  };
  const attach = () => {
    (helper.getNode('out') as Node).on('input', onOutput);
    (helper.getNode('caught') as Node).on('input', (m: Record<string, unknown>) => settle(m, false));
    (helper.getNode('completed') as Node).on('input', (m: Record<string, unknown>) => settle(m, true));
  };
  attach();

  let paused = false;
  const wish = (t: Target, wanted: boolean, extra: Record<string, unknown> = {}) => {
    const id = `w${++seq}`;
    stats.wishes++;
    lastWish.set(t.token, wanted);
    waiting.set(id, {
      timer: setTimeout(() => {
        if (!waiting.delete(id)) return;
        if (atRedeploy.has(id)) stats.inFlightAtRedeploy++;
        else stats.lost++;
      }, 35_000),
    });
    (helper.getNode('ctl') as Node & { receive(m: unknown): void }).receive({ _soakId: id, payload: wanted, target: t, ...extra });
  };

  const t0 = Date.now();
  const cpu0 = process.cpuUsage();
  const end = t0 + args.seconds * 1000;
  const faults = injectFaults(sim, random, [...FAULTS, ...STATION_FAULTS, ...STATION_FAULTS]);
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const wisher = async (t: Target) => {
    while (Date.now() < end) {
      await pause(300 + Math.floor(random() * 2700));
      if (paused || Date.now() >= end) continue;
      const on = random() < 0.5;
      const extra: Record<string, unknown> = {};
      if (!on && random() < 0.05) {
        extra.force = true;
        stats.forced++;
      }
      if (on && random() < 0.05) {
        extra.restart = true;
        stats.restarts++;
      }
      wish(t, on, extra);
    }
  };
  const redeployer = async () => {
    while (Date.now() + REDEPLOY_EVERY_MS < end) {
      await pause(REDEPLOY_EVERY_MS);
      paused = true;
      for (const id of waiting.keys()) atRedeploy.add(id);
      await red.stopFlows();
      await red.startFlows();
      attach();
      stats.redeploys++;
      paused = false;
    }
  };
  await Promise.all([...targets.map(wisher), redeployer()]);
  faults.stop();

  // The faults have stopped: each last wish once more, as a scheduler re-sends it, then every connector must get there.
  const t1 = Date.now();
  const inState = (t: Target) => {
    const s = sim.session(t.token);
    const charging = s !== undefined && s.stoppedAt === null && Date.now() >= s.startedAt;
    return lastWish.get(t.token) === undefined || charging === lastWish.get(t.token);
  };
  const atFaultsStop = targets.filter(inState).length;
  for (const t of targets) if (lastWish.has(t.token)) wish(t, lastWish.get(t.token) as boolean);
  while (Date.now() - t1 < CONVERGE_MS && !targets.every(inState)) await pause(100);
  const convergeMs = Date.now() - t1;
  const converged = targets.filter(inState).length;
  // Every wish answered (done or Catch), but those caught in a redeploy, which the old flow's nodes cannot report.
  const pending = () => [...waiting.keys()].filter((id) => !atRedeploy.has(id)).length;
  const drainEnd = Date.now() + 35_000;
  while (pending() > 0 && Date.now() < drainEnd) await pause(50);
  const seconds = (Date.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);

  await helper.unload();
  const requestsAtClose = sim.counters.progressQueries + sim.counters.startArrivals + sim.counters.stopArrivals;
  await pause(2_000);
  const requestsAfterClose = sim.counters.progressQueries + sim.counters.startArrivals + sim.counters.stopArrivals - requestsAtClose;

  const report = {
    date: new Date().toISOString(),
    machine: `${os.cpus().length} cores, Node ${process.version}`,
    rotation: 'control',
    seconds: Math.round(seconds),
    connectors: args.connectors,
    settings: `guard ${GUARD_S} s, check every ${CHECK_S} s, wait ${WAIT_S} s, startAttempts 2, client timeout 1 s`,
    wishes: stats.wishes,
    wishesForced: stats.forced,
    wishesRestart: stats.restarts,
    wishesDone: stats.done,
    wishesToCatch: stats.caught,
    errorsByCode,
    lost: stats.lost + pending(),
    inFlightAtRedeploy: stats.inFlightAtRedeploy + [...waiting.keys()].filter((id) => atRedeploy.has(id)).length,
    outputs: stats.outputs,
    repeatedOutputs: stats.repeatedOutputs,
    backgroundErrorsToCatch: stats.backgroundErrors,
    backgroundByCode,
    redeploys: stats.redeploys,
    startArrivals: sim.counters.startArrivals,
    stopArrivals: sim.counters.stopArrivals,
    progressQueries: sim.counters.progressQueries,
    duplicateStartsAtService: sim.counters.duplicateStarts,
    duplicateStopsAtService: sim.counters.duplicateStops,
    faultsInjected: faults.injected,
    faultsApplied: sim.counters.faultsApplied,
    inWantedStateWhenFaultsStopped: `${atFaultsStop}/${args.connectors}`,
    connectorsInWantedState: `${converged}/${args.connectors}`,
    convergeMs,
    requestsAfterClose,
    secretsOrTokensInMessages: stats.leaks,
    crashes: crashes.length,
    cpuSeconds: Math.round((cpu.user + cpu.system) / 1e4) / 100,
    heapStartMiB: Math.round(heapStart / 1048576),
    heapEndMiB: (global.gc?.(), Math.round(process.memoryUsage().heapUsed / 1048576)),
  };
  await new Promise<void>((r) => helper.stopServer(() => r()));
  await sim.stop();

  const rows = Object.entries(report).map(([k, v]) => `| ${k} | ${typeof v === 'object' ? JSON.stringify(v) : v} |`);
  const md = `# Soak run: control rotation\n\n| figure | value |\n|---|---|\n${rows.join('\n')}\n`;
  console.log(md);
  if (firstError.size) console.log('One message per error kind:\n' + [...firstError].map(([k, m]) => `  ${k}: ${m}`).join('\n'));
  if (repeated.length) console.log('Repeated outputs:\n' + repeated.join('\n'));
  if (converged < args.connectors) console.log('Not in the wanted state:\n' + targets.filter((t) => !inState(t)).map((t) => `  ${t.token}: wanted ${String(lastWish.get(t.token))}, session ${JSON.stringify(sim.session(t.token) ?? null)}`).join('\n'));
  if (crashes.length) console.log('Crashes:\n' + crashes.slice(0, 5).join('\n'));
  if (args.out) {
    fs.mkdirSync(path.dirname(args.out), { recursive: true });
    fs.writeFileSync(args.out, md);
  }
  const failures = Object.entries({
    duplicateStartsAtService: report.duplicateStartsAtService,
    lost: report.lost,
    repeatedOutputs: report.repeatedOutputs,
    connectorsNotInWantedState: args.connectors - converged,
    requestsAfterClose,
    secretsOrTokensInMessages: report.secretsOrTokensInMessages,
    crashes: report.crashes,
  }).filter(([, n]) => n !== 0);
  const ok = failures.length === 0;
  console.log(ok ? 'SOAK PASSED' : `SOAK FAILED: ${failures.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  process.exit(ok ? 0 : 1);
}
