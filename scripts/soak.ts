/**
 * `npm run soak`: thousands of mixed START / progress / STOP commands through the
 * nodes in a real Node-RED runtime, against the simulator on 127.0.0.1, while
 * faults are injected at random. Bounded in time and count; loopback only.
 *
 *   npm run soak -- --seconds 60 --workers 40 --max-commands 20000 --seed 7 [--transport http|https-proxy|both]
 *   npm run soak -- --rotation control --connectors 20 --seconds 60   (scripts/soak-control.ts)
 *   npm run soak -- --fleet --seeds 20 --seconds 15   (Redis faults over two replicas: scripts/soak-fleet.ts)
 *   npm run soak -- --fleet --processes --seeds 20   (the nemesis over three Node-RED processes, odd seeds on one Redis, even on Sentinel: scripts/soak-fleet-processes.ts)
 *   npm run soak -- --control --days 30   (charging-control for a simulated month: scripts/soak-control-month.ts)
 *   npm run soak -- --depot --days 30     (a depot of 8 connectors, limit 3, for a simulated month: scripts/soak-depot.ts)
 *
 * By default the run is made twice, half the time each: over plain http, then
 * over https (a private CA, given through a tls-config node) through an
 * authenticating CONNECT proxy named by HTTPS_PROXY, as most installs talk.
 *
 * Each worker runs sessions the way the error messages tell a user to: after
 * OUTCOME_UNKNOWN it queries progress instead of sending the command again.
 * A command is "lost" when neither its output nor a Catch message arrives.
 *
 * The simulator counts every START and STOP at arrival, whatever it answered, so
 * the soak also reports the same message arriving twice (each START has its own
 * token; a STOP is known by its transactionId, beyond the STOPs the soak itself
 * sent again) and an OUTCOME_UNKNOWN for a command that never arrived (the
 * client should have known it was not sent). Real servers' connection habits
 * are in the rotation: close-after-answer and idle keep-alive closes with no hint.
 * Exits 1 when an invariant fails; a watchdog ends a run that hangs.
 */
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import helper from 'node-red-node-test-helper';
import type { Node } from 'node-red';
import { ChargingServiceSimulator, commandKey } from '../simulator/simulator';
import { injectFaults, rng } from './soak-faults';
import { soakControl } from './soak-control';
import { soakFleet } from './soak-fleet';
import { soakFleetProcesses } from './soak-fleet-processes';
import { soakControlMonth } from './soak-control-month';
import { soakDepot } from './soak-depot';
import { TestProxy } from '../test/proxy-server';

/** Where the nodes talk to the simulator: plain http, or https (private CA through a tls-config node) through an authenticating CONNECT proxy. */
type Transport = 'http' | 'https-proxy';

interface Args {
  /** 'both' (the default): the whole run twice, half the time each, http then https through the proxy */
  transport: Transport | 'both';
  /** commands (START / progress / STOP by hand, as a flow does), control (wishes to charging-control), fleet (Redis faults: soak-fleet.ts), or month (--control: charging-control for --days simulated days) */
  rotation: 'commands' | 'control' | 'fleet' | 'month' | 'depot';
  /** --fleet: how many seeded schedules */
  seeds: number;
  /** --fleet --processes: the schedules over three real Node-RED processes instead of two in-process replicas */
  processes: boolean;
  /** simulated days of the month soak */
  days: number;
  /** connectors of the control rotation */
  connectors: number;
  seconds: number;
  workers: number;
  maxCommands: number;
  seed: number;
  out: string | null;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { transport: 'both', seconds: 60, workers: 40, maxCommands: 50_000, seed: 1, out: null, rotation: 'commands', connectors: 20, seeds: 20, days: 30, processes: false };
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1];
    if (argv[i] === '--fleet') {
      a.rotation = 'fleet';
      i--; // a flag: no value follows
      continue;
    }
    if (argv[i] === '--processes') {
      a.processes = true;
      i--; // a flag: no value follows
      continue;
    }
    if (argv[i] === '--control' || argv[i] === '--depot') {
      a.rotation = argv[i] === '--control' ? 'month' : 'depot';
      i--; // a flag: no value
    } else if (argv[i] === '--days') a.days = Number(v);
    else if (argv[i] === '--transport') {
      if (v !== 'http' && v !== 'https-proxy' && v !== 'both') throw new Error('--transport is http, https-proxy or both');
      a.transport = v;
    } else if (argv[i] === '--seconds') a.seconds = Number(v);
    else if (argv[i] === '--workers') a.workers = Number(v);
    else if (argv[i] === '--max-commands') a.maxCommands = Number(v);
    else if (argv[i] === '--seed') a.seed = Number(v);
    else if (argv[i] === '--out') a.out = v;
    else if (argv[i] === '--connectors') a.connectors = Number(v);
    else if (argv[i] === '--seeds') a.seeds = Number(v);
    else if (argv[i] === '--redis') continue; // --fleet --processes reads it
    else if (argv[i] === '--rotation' && (v === 'commands' || v === 'control')) a.rotation = v;
    else throw new Error(`unknown option ${argv[i]}`);
  }
  return a;
}

/** The message budget of the nodes (DEFAULT_RETRY.maxTotalMs): every command must be answered within it. */
const DEADLINE_MS = 30_000;
/** A bearer or Basic value that was not redacted, or the client secret. */
const LEAK = /Bearer (?!\*\*\*)[A-Za-z0-9_-]{10,}|Basic (?!\*\*\*)[A-Za-z0-9+/=]{10,}/;

const CLEAR_CODES = new Set(['MISSING_FIELD', 'INVALID_INPUT', 'CONFIG', 'AUTH', 'HTTP', 'RATE_LIMITED', 'NETWORK', 'TIMEOUT', 'OUTCOME_UNKNOWN', 'BAD_RESPONSE']);

interface Outcome {
  ok: boolean;
  msg: Record<string, unknown>;
  code?: string;
  message?: string;
}

/** The msg as the debug sidebar would show it: everything but our own bookkeeping. */
function shown(msg: Record<string, unknown>): string {
  try {
    return JSON.stringify(msg);
  } catch {
    return '';
  }
}

/** The command's identity at the service (commandKey): a START from its fields, a STOP from the progress record it is given. */
function arrivalKey(label: string, payload: unknown): ReturnType<typeof commandKey> {
  const p = payload as Record<string, unknown> & { transactionData?: { transactionId?: string } };
  if (label === 'START') return commandKey({ action: 'START', token: p.token, locationId: p.locationId, evseId: p.evseId });
  if (label === 'STOP') return commandKey({ action: 'STOP', transactionId: p.transactionData?.transactionId });
  return null;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.rotation === 'fleet' && args.processes) {
    const at = process.argv.indexOf('--redis');
    const redis = at > 0 ? process.argv[at + 1] : undefined;
    if (redis !== undefined && redis !== 'single' && redis !== 'sentinel') throw new Error('--redis takes single or sentinel');
    return soakFleetProcesses({ seeds: args.seeds, seed: args.seed, seconds: process.argv.includes('--seconds') ? args.seconds : 15, redis });
  }
  if (args.rotation === 'fleet') return soakFleet({ seeds: args.seeds, seed: args.seed, seconds: process.argv.includes('--seconds') ? args.seconds : 15 });
  if (args.rotation === 'month') process.exit((await soakControlMonth(args)) ? 0 : 1);
  if (args.rotation === 'depot') process.exit((await soakDepot(args)) ? 0 : 1);
  const phases: Transport[] = args.transport === 'both' ? ['http', 'https-proxy'] : [args.transport];
  // Bounded whatever happens: the runs, a 35 s drain each, and a margin; a hang is a failure.
  const bound = args.seconds + 120 * phases.length;
  setTimeout(() => {
    console.error(`SOAK FAILED: still running ${bound} s after it started`);
    process.exit(1);
  }, bound * 1000).unref();
  if (args.rotation === 'control') return soakControl(args);
  const crashes = { count: 0, reasons: [] as string[] };
  process.on('uncaughtException', (e) => {
    crashes.count++;
    crashes.reasons.push(String(e?.stack ?? e));
  });
  process.on('unhandledRejection', (e) => {
    crashes.count++;
    crashes.reasons.push(String((e as Error)?.stack ?? e));
  });
  helper.init(require.resolve('node-red'));
  let ok = true;
  for (const transport of phases) {
    const seconds = Math.max(5, Math.round(args.seconds / phases.length));
    ok = (await soak({ ...args, seconds, out: args.out && phases.length > 1 ? args.out.replace(/(\.md)?$/, `-${transport}$1`) : args.out }, transport, crashes)) && ok;
  }
  console.log(ok ? 'SOAK PASSED' : 'SOAK FAILED');
  process.exit(ok ? 0 : 1);
}

/** The https phase's set-up: the simulator's certificate, its CA given through a tls-config node, and a proxy wanting credentials. */
async function httpsThroughProxy(): Promise<{ simTls: { key: Buffer; cert: Buffer }; tlsNode: { id: string; type: string } & Record<string, unknown>; proxy: TestProxy; secret: string; restoreEnv(): void }> {
  const fixtures = path.join(__dirname, '..', '..', 'test', 'fixtures');
  const cert = fs.readFileSync(path.join(fixtures, 'sim-cert.pem'));
  const key = fs.readFileSync(path.join(fixtures, 'sim-key.pem'));
  const secret = 'soak-proxy-P4ss';
  const proxy = await new TestProxy({ requireAuth: `Basic ${Buffer.from(`soak:${secret}`).toString('base64')}` }).start();
  const saved = { HTTPS_PROXY: process.env.HTTPS_PROXY, NO_PROXY: process.env.NO_PROXY, no_proxy: process.env.no_proxy, https_proxy: process.env.https_proxy };
  for (const k of Object.keys(saved)) delete process.env[k];
  process.env.HTTPS_PROXY = `http://soak:${secret}@127.0.0.1:${proxy.port}`;
  return {
    simTls: { key, cert },
    // The tls-config node reads its CA from a file, as an install configures it.
    tlsNode: { id: 'tlsconf', type: 'tls-config', name: 'soak CA', cert: '', key: '', ca: path.join(fixtures, 'sim-cert.pem'), verifyservercert: true },
    proxy,
    secret,
    restoreEnv: () => {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    },
  };
}

async function soak(args: Args, transport: Transport, crashes: { count: number; reasons: string[] }): Promise<boolean> {
  const random = rng(args.seed);
  const crashesBefore = crashes.count;
  const viaProxy = transport === 'https-proxy' ? await httpsThroughProxy() : null;
  const sim = await new ChargingServiceSimulator({ startDelayMs: 30, stopDelayMs: 30, tokenLifetimeSec: 12, keepRequests: 0, tls: viaProxy?.simTls }).start();
  await new Promise<void>((r) => helper.startServer(() => r()));
  /* eslint-disable @typescript-eslint/no-require-imports */
  const nodes = ['charging-service', 'charging-start', 'charging-progress', 'charging-stop'].map((n) => require(`../nodes/${n}`));
  if (viaProxy) nodes.push(require(require.resolve('@node-red/nodes/core/network/05-tls.js', { paths: [path.dirname(require.resolve('node-red'))] })));
  /* eslint-enable @typescript-eslint/no-require-imports */
  const flow: Array<{ id: string; type: string } & Record<string, unknown>> = [
    { id: 'f1', type: 'tab' },
    ...(viaProxy ? [viaProxy.tlsNode] : []),
    { id: 'svc', type: 'charging-service', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 1, maxInFlight: 16, ...(viaProxy ? { tls: 'tlsconf' } : {}) },
    { id: 'start', type: 'charging-start', z: 'f1', service: 'svc', wires: [['out']] },
    { id: 'progress', type: 'charging-progress', z: 'f1', service: 'svc', wires: [['out']] },
    { id: 'stop', type: 'charging-stop', z: 'f1', service: 'svc', wires: [['out']] },
    { id: 'out', type: 'helper', z: 'f1' },
    { id: 'caught', type: 'helper', z: 'f1' },
    { id: 'catcher', type: 'catch', z: 'f1', scope: null, uncaught: false, wires: [['caught']] },
  ];
  await helper.load(nodes, flow, { svc: { clientId: sim.options.clientId, clientSecret: sim.options.clientSecret } });
  // The test helper wraps Node.prototype.send/status/... and the log in sinon spies that keep every
  // call's arguments; over 50 000 commands that is the biggest memory user. Restore the originals.
  (helper as unknown as { _sandbox: { restore(): void } })._sandbox.restore();
  // Node-RED copies Node.prototype.send onto each wired node at deploy (updateWires), so the
  // instances still hold the spy: wire them again to pick up the restored method.
  for (const n of flow) {
    const node = helper.getNode(n.id) as (Node & { updateWires?(w: unknown): void; wires?: unknown }) | null;
    if (node && 'wires' in n) node.updateWires?.(n.wires);
  }
  global.gc?.();
  const heapStart = process.memoryUsage().heapUsed;

  const waiting = new Map<string, (o: Outcome) => void>();
  const settle = (msg: Record<string, unknown>, ok: boolean) => {
    const id = msg._soakId as string;
    const resolve = waiting.get(id);
    if (!resolve) return;
    waiting.delete(id);
    const error = msg.error as { code?: string; message?: string } | undefined;
    resolve({ ok, msg, code: error?.code, message: error?.message });
  };
  (helper.getNode('out') as Node).on('input', (m: Record<string, unknown>) => settle(m, true));
  (helper.getNode('caught') as Node).on('input', (m: Record<string, unknown>) => settle(m, false));

  const stats = {
    commands: { START: 0, progress: 0, STOP: 0 } as Record<string, number>,
    succeeded: 0,
    failedClear: 0,
    failedUnclear: 0,
    lost: 0,
    outcomeUnknown: 0,
    sessionsCompleted: 0,
    errorsByCode: {} as Record<string, number>,
    slowestAnswerMs: 0,
    lateAnswers: 0,
    leaks: 0,
    /** OUTCOME_UNKNOWN for a START or STOP that had not arrived at the service by the time it was reported */
    unknownNeverReceived: 0,
  };
  /** STOPs the soak itself sent per transactionId (a STOP may be sent again on purpose) */
  const stopsSent = new Map<string, number>();
  /** every START's identity at the service, to say which one arrived twice */
  const startsSent = new Set<string>();
  const unclear: string[] = [];
  /** one message per error kind, printed after the table so a run's failures can be read */
  const firstError = new Map<string, string>();
  let seq = 0;
  const deadline = Date.now() + args.seconds * 1000;
  const total = () => stats.commands.START + stats.commands.progress + stats.commands.STOP;
  const running = () => Date.now() < deadline && total() < args.maxCommands;

  function command(node: 'start' | 'progress' | 'stop', payload: unknown): Promise<Outcome | null> {
    const label = node === 'start' ? 'START' : node === 'stop' ? 'STOP' : 'progress';
    stats.commands[label]++;
    // Which message this is at the service, and how often it had arrived before it was sent.
    const id = arrivalKey(label, payload);
    const arrivedBefore = id ? sim.arrivals(id.action, id.key) : 0;
    if (id?.action === 'STOP') stopsSent.set(id.key, (stopsSent.get(id.key) ?? 0) + 1);
    if (id?.action === 'START') startsSent.add(id.key);
    const soakId = `c${++seq}`;
    const sentAt = performance.now();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (waiting.delete(soakId)) {
          stats.lost++;
          resolve(null);
        }
      }, DEADLINE_MS + 5_000);
      waiting.set(soakId, (o) => {
        clearTimeout(timer);
        const took = performance.now() - sentAt;
        stats.slowestAnswerMs = Math.max(stats.slowestAnswerMs, Math.round(took));
        if (took > DEADLINE_MS) stats.lateAnswers++;
        const text = shown(o.msg);
        if (text.includes(sim.options.clientSecret) || (viaProxy && text.includes(viaProxy.secret)) || LEAK.test(text)) {
          stats.leaks++;
          if (unclear.length < 10) unclear.push(`LEAK in ${label}: ${text.slice(0, 300)}`);
        }
        if (o.ok) stats.succeeded++;
        else if (o.code && CLEAR_CODES.has(o.code) && o.message && o.message.length > 20) stats.failedClear++;
        else {
          stats.failedUnclear++;
          if (unclear.length < 10) unclear.push(`${o.code}: ${o.message}`);
        }
        if (o.code === 'OUTCOME_UNKNOWN') {
          stats.outcomeUnknown++;
          if (id && sim.arrivals(id.action, id.key) === arrivedBefore) {
            stats.unknownNeverReceived++;
            if (unclear.length < 10) unclear.push(`${label} OUTCOME_UNKNOWN never arrived: ${o.message}`);
          }
        }
        if (!o.ok) {
          const k = `${label} ${o.code}`;
          stats.errorsByCode[k] = (stats.errorsByCode[k] ?? 0) + 1;
          if (!firstError.has(k)) firstError.set(k, o.message ?? '');
        }
        resolve(o);
      });
      (helper.getNode(node) as Node & { receive(m: unknown): void }).receive({ _soakId: soakId, payload });
    });
  }

  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Polls until the record satisfies want, or gives up; returns the last good answer. */
  async function pollUntil(token: string, want: (o: Outcome) => boolean, tries = 40): Promise<Outcome | null> {
    let last: Outcome | null = null;
    for (let k = 0; k < tries && running(); k++) {
      const o = await command('progress', { token });
      if (o && o.ok) {
        last = o;
        if (want(o)) return o;
      }
      await pause(20);
    }
    return last;
  }

  const hasTx = (o: Outcome) => Boolean((o.msg.session as { transactionId?: string } | null)?.transactionId);
  const gone = (o: Outcome) => o.msg.payload === null;

  async function worker(w: number): Promise<void> {
    let round = 0;
    while (running()) {
      round++;
      const cmd = { locationId: `SOAK-LOC-${w}`, evseId: String(round), token: `SOAK-${w}-${round}` };
      const started = await command('start', cmd);
      if (!started) continue;
      if (!started.ok && started.code !== 'OUTCOME_UNKNOWN') {
        await pause(50); // surely not processed: a flow would try again a little later
        continue;
      }
      // Started, or maybe: find out the way the error message says, by querying progress.
      const live = await pollUntil(cmd.token, hasTx);
      if (!live || !hasTx(live)) continue;
      for (let attempt = 0; attempt < 3 && running(); attempt++) {
        const stopped = await command('stop', live.msg.payload);
        if (!stopped) break;
        if (stopped.ok || stopped.code === 'OUTCOME_UNKNOWN') {
          const end = await pollUntil(cmd.token, gone);
          if (end && gone(end)) {
            stats.sessionsCompleted++;
            break;
          }
        }
        // A STOP that surely was not processed (e.g. 429 exhausted) is tried again.
        if (stopped.code === 'HTTP' && /already stopping/.test(stopped.message ?? '')) break;
      }
    }
  }

  const faults = injectFaults(sim, random);

  const t0 = Date.now();
  const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: args.workers }, (_, w) => worker(w)));
  faults.stop();
  // Let anything still in flight land before counting.
  const drainEnd = Date.now() + 35_000;
  while (waiting.size > 0 && Date.now() < drainEnd) await pause(50);
  const seconds = (Date.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);

  const report = {
    transport: transport === 'http' ? 'http' : 'https (private CA, tls-config) through an authenticating CONNECT proxy',
    ...(viaProxy ? { connectsAtProxy: viaProxy.proxy.seen.filter((x) => x.startsWith('CONNECT')).length } : {}),
    date: new Date().toISOString(),
    machine: `${os.cpus().length} cores, Node ${process.version}`,
    seconds: Math.round(seconds),
    workers: args.workers,
    commandsSent: total(),
    byKind: stats.commands,
    succeeded: stats.succeeded,
    failedWithClearError: stats.failedClear,
    failedUnclear: stats.failedUnclear,
    outcomeUnknown: stats.outcomeUnknown,
    errorsByCode: stats.errorsByCode,
    lost: stats.lost + waiting.size,
    slowestAnswerMs: stats.slowestAnswerMs,
    deadlineMs: DEADLINE_MS,
    answersAfterDeadline: stats.lateAnswers,
    secretsOrTokensInMessages: stats.leaks,
    sessionsCompleted: stats.sessionsCompleted,
    duplicateStartsAtService: sim.counters.duplicateStarts,
    duplicateStopsAtService: sim.counters.duplicateStops,
    outcomeUnknownNeverReceived: stats.unknownNeverReceived,
    startArrivals: sim.counters.startArrivals,
    stopArrivals: sim.counters.stopArrivals,
    duplicateStartArrivals: sim.counters.duplicateStartArrivals,
    // The soak sends a STOP again on purpose when the session did not end: those are not the client's duplicates.
    duplicateStopArrivalsBeyondSent: [...stopsSent].reduce((n, [key, sent]) => n + Math.max(0, sim.duplicateArrivals('STOP', key) - (sent - 1)), 0),
    tokenRequests: sim.counters.tokenRequests,
    tokensIssued: sim.counters.tokensIssued,
    faultsInjected: faults.injected,
    faultsApplied: sim.counters.faultsApplied,
    crashes: crashes.count - crashesBefore,
    cpuSeconds: Math.round((cpu.user + cpu.system) / 1e4) / 100,
    heapStartMiB: Math.round(heapStart / 1048576),
    heapEndMiB: (global.gc?.(), Math.round(process.memoryUsage().heapUsed / 1048576)),
    rssMiB: Math.round(process.memoryUsage().rss / 1048576),
  };
  await helper.unload();
  await new Promise<void>((r) => helper.stopServer(() => r()));
  await sim.stop();
  if (viaProxy) {
    viaProxy.restoreEnv();
    await viaProxy.proxy.stop();
  }

  const rows = Object.entries(report).map(([k, v]) => `| ${k} | ${typeof v === 'object' ? JSON.stringify(v) : v} |`);
  const md = `# Soak run (${transport})\n\n| figure | value |\n|---|---|\n${rows.join('\n')}\n`;
  console.log(md);
  if (firstError.size) console.log('One message per error kind:\n' + [...firstError].map(([k, m]) => `  ${k}: ${m}`).join('\n'));
  const twice = [...startsSent].filter((key) => sim.duplicateArrivals('START', key) > 0);
  if (twice.length) console.log('STARTs that arrived more than once:\n' + twice.slice(0, 10).map((key) => `  ${key}: answered ${sim.arrivalAnswers('START', key).join(', ')}`).join('\n'));
  const beyond = [...stopsSent].filter(([key, sent]) => sim.duplicateArrivals('STOP', key) > sent - 1);
  if (beyond.length) console.log('STOPs that arrived more often than sent:\n' + beyond.slice(0, 10).map(([key, sent]) => `  ${key}: sent ${sent}, answered ${sim.arrivalAnswers('STOP', key).join(', ')}`).join('\n'));
  if (unclear.length) console.log('Unclear errors:\n' + unclear.join('\n'));
  if (crashes.count > crashesBefore) console.log('Crashes:\n' + crashes.reasons.slice(crashesBefore, crashesBefore + 5).join('\n'));
  if (args.out) {
    fs.mkdirSync(path.dirname(args.out), { recursive: true });
    fs.writeFileSync(args.out, md);
  }
  const ok =
    report.lost === 0 &&
    report.duplicateStartsAtService === 0 &&
    report.duplicateStopsAtService === 0 &&
    report.outcomeUnknownNeverReceived === 0 &&
    report.duplicateStartArrivals === 0 &&
    report.duplicateStopArrivalsBeyondSent === 0 &&
    report.crashes === 0 &&
    report.failedUnclear === 0 &&
    report.answersAfterDeadline === 0 &&
    report.secretsOrTokensInMessages === 0;
  console.log(`${transport}: ${ok ? 'passed' : 'FAILED'}`);
  return ok;
}

void main();
