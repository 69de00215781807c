#!/usr/bin/env node
/**
 * charging-simulator: run the service simulator from the command line.
 *   charging-simulator --port 18080 --fault get:status:503:3 --fault token:latency:2000
 */
import fs from 'node:fs';
import { ChargingServiceSimulator, FaultKind, FaultRule, FaultTarget, SimulatorOptions } from './simulator';

export const HELP = `Usage: charging-simulator [options]
  --port N              port to listen on (default 18080; 0 picks a free one)
  --host H              address to bind (default 127.0.0.1)
  --client-id ID        client ID to accept (default demo-client)
  --client-secret S     client secret to accept (default demo-secret)
  --token-lifetime S    access token lifetime in seconds (default 1800, the spec's 30 min)
  --no-expires-in       leave expires_in out of token responses
  --start-delay MS      time from START to a session with a transactionId (default 1000)
  --stop-delay MS       time from STOP until the session is gone (default 1000)
  --power W             charging power that advances the meter (default 11000)
  --no-session MODE     answer to a progress query with no session: 404 (default), 204, empty200
  --auth-method M       client authentication the token endpoint accepts:
                        basic (default), basic-form-encoded, client_secret_post
  --fault SPEC          inject a fault: target:kind[:arg][:times]
                        target: token | get | post | service | any
                        kind:   latency:MS | hang | reset | status:CODE | revoke        (before the request is handled)
                                malformed | cut | huge:BYTES | drip:MS | deep:LEVELS | echo[:CODE]
                                                                  (corrupt the real answer; a POST is processed first)
                        times:  a number or 'always' (default 1; latency and drip: always)
                        e.g. get:status:503:3, token:latency:2000:always, post:reset, get:drip:400, any:echo
                        Real servers and gateways (target optional, default any; ignore-stop, ignore-start: post):
                          [target:]close-after-answer[:times]  the answer, then the connection closes with no
                                                               Connection: close (default always)
                          idle-close:MS                        idle keep-alive connections close after MS, with no
                                                               Keep-Alive: timeout= hint (until cleared)
                          [target:]route-404[:html][:times]    a gateway that lost its route: 404 with Kong's JSON
                                                               body, or nginx's HTML page (default always)
                          [post:]ignore-stop:N                 the station ignores the next N accepted STOPs: 202,
                                                               the session goes on
                          [post:]ignore-start:N                the station ignores the next N accepted STARTs: 202,
                                                               no session appears (a car not plugged in)
  --idle-close MS       the same as --fault idle-close:MS
  --tls-cert FILE       serve https with this certificate (PEM); needs --tls-key
  --tls-key FILE        the certificate's private key (PEM)
  --tls-ca FILE         CA certificates that client certificates are checked against (PEM)
  --tls-require-client-cert
                        refuse the TLS handshake without a client certificate signed by --tls-ca
At run time: POST /__sim/faults with a JSON rule, DELETE /__sim/faults, GET /__sim/state.`;

/** The faults of real servers and gateways, with the target they take when the spec leaves it out. */
const DEFAULT_TARGET: Partial<Record<FaultKind, FaultTarget>> = { 'close-after-answer': 'any', 'idle-close': 'any', 'route-404': 'any', 'ignore-stop': 'post', 'ignore-start': 'post' };

function timesOf(spec: string, v: string | undefined, dflt: number): number {
  if (v === undefined || v === '') return dflt;
  if (v === 'always') return Infinity;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`bad --fault ${spec}: ${v} is not a count`);
  return n;
}

/** close-after-answer, idle-close, route-404, ignore-stop, ignore-start: target optional, their own argument. */
function parseServerFault(spec: string, parts: string[]): FaultRule {
  const [first] = parts;
  const [target, kind, ...rest] = first in DEFAULT_TARGET ? [DEFAULT_TARGET[first as FaultKind] as string, ...parts] : parts;
  const rule: FaultRule = { target: target as FaultTarget, kind: kind as FaultKind };
  if (kind === 'close-after-answer') rule.times = timesOf(spec, rest[0], Infinity);
  else if (kind === 'ignore-stop' || kind === 'ignore-start') rule.times = timesOf(spec, rest[0], 1);
  else if (kind === 'route-404') {
    if (rest[0] === 'html' || rest[0] === 'json') rule.format = rest.shift() as 'html' | 'json';
    rule.times = timesOf(spec, rest[0], Infinity);
  } else {
    const ms = Number(rest[0]);
    if (!rest[0] || !Number.isFinite(ms) || ms <= 0) throw new Error(`bad --fault ${spec}: idle-close needs a time in ms, e.g. idle-close:1000`);
    rule.delayMs = ms;
    rule.times = Infinity;
  }
  return rule;
}

export function parseFault(spec: string): FaultRule {
  const parts = spec.split(':');
  if (parts[0] in DEFAULT_TARGET || (parts[1] ?? '') in DEFAULT_TARGET) {
    if (!['token', 'get', 'post', 'service', 'any', ...Object.keys(DEFAULT_TARGET)].includes(parts[0])) throw new Error(`bad --fault ${spec}`);
    return parseServerFault(spec, parts);
  }
  const [target, kind, arg, times] = parts;
  const targets: FaultTarget[] = ['token', 'get', 'post', 'service', 'any'];
  const kinds: FaultKind[] = ['latency', 'hang', 'reset', 'status', 'revoke', 'malformed', 'cut', 'truncated', 'huge', 'drip', 'deep', 'echo'];
  if (!targets.includes(target as FaultTarget) || !kinds.includes(kind as FaultKind)) throw new Error(`bad --fault ${spec}`);
  const rule: FaultRule = { target: target as FaultTarget, kind: kind as FaultKind };
  if (arg) {
    const n = Number(arg);
    if (!Number.isFinite(n)) throw new Error(`bad --fault ${spec}: ${arg} is not a number`);
    if (kind === 'status' || kind === 'echo') rule.status = n;
    else if (kind === 'latency' || kind === 'drip') rule.delayMs = n;
    else if (kind === 'huge') rule.hugeBytes = n;
    else if (kind === 'deep') rule.depth = n;
  }
  rule.times = times === 'always' ? Infinity : times ? Number(times) : kind === 'latency' || kind === 'drip' ? Infinity : 1;
  return rule;
}

export function parseArgs(argv: string[]): { options: SimulatorOptions; faults: FaultRule[]; help: boolean } {
  const options: SimulatorOptions = { port: 18080 };
  const faults: FaultRule[] = [];
  let help = false;
  const tls: Partial<NonNullable<SimulatorOptions['tls']>> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    switch (a) {
      case '--port': options.port = Number(next()); break;
      case '--host': options.host = next(); break;
      case '--client-id': options.clientId = next(); break;
      case '--client-secret': options.clientSecret = next(); break;
      case '--auth-method': {
        const m = next();
        if (m !== 'basic' && m !== 'basic-form-encoded' && m !== 'client_secret_post') throw new Error(`--auth-method must be basic, basic-form-encoded or client_secret_post (got ${m})`);
        options.authMethod = m;
        break;
      }
      case '--token-lifetime': options.tokenLifetimeSec = Number(next()); break;
      case '--no-expires-in': options.omitExpiresIn = true; break;
      case '--start-delay': options.startDelayMs = Number(next()); break;
      case '--stop-delay': options.stopDelayMs = Number(next()); break;
      case '--power': options.powerW = Number(next()); break;
      case '--no-session': options.noSession = next() as SimulatorOptions['noSession']; break;
      case '--fault': faults.push(parseFault(next())); break;
      case '--idle-close': faults.push(parseFault(`idle-close:${next()}`)); break;
      case '--tls-cert': tls.cert = fs.readFileSync(next()); break;
      case '--tls-key': tls.key = fs.readFileSync(next()); break;
      case '--tls-ca': tls.ca = fs.readFileSync(next()); break;
      case '--tls-require-client-cert': tls.requestCert = true; break;
      case '-h': case '--help': help = true; break;
      default: throw new Error(`unknown option ${a}`);
    }
  }
  if (Object.keys(tls).length > 0) {
    if (!tls.cert || !tls.key) throw new Error('https needs both --tls-cert and --tls-key');
    if (tls.requestCert && !tls.ca) throw new Error('--tls-require-client-cert needs --tls-ca (the CA client certificates are checked against)');
    options.tls = { ...tls, cert: tls.cert, key: tls.key };
  }
  return { options, faults, help };
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${HELP}`);
    process.exit(2);
  }
  if (parsed.help) {
    console.log(HELP);
    return;
  }
  const sim = new ChargingServiceSimulator(parsed.options);
  try {
    await sim.start();
  } catch (err) {
    const inUse = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
    console.error(
      `Could not listen on ${parsed.options.host ?? '127.0.0.1'}:${parsed.options.port} (${(err as Error).message}).` +
        (inUse ? ' Is npm start running? Its simulator already uses this port: inject faults into it with npm start -- --fault …, or POST /__sim/faults; or pick another --port.' : ''),
    );
    process.exit(1);
  }
  for (const f of parsed.faults) sim.inject(f);
  const o = sim.options;
  console.log(`Charging service simulator listening on ${sim.url}
  Base URL:      ${sim.baseUrl}
  Token URL:     ${sim.authUrl}     (tokens at ${sim.authUrl}/v1/token)
  Client ID:     ${o.clientId}
  Client secret: ${o.clientSecret}   (client authentication: ${o.authMethod})
  Token lifetime ${o.tokenLifetimeSec} s; session starts ${o.startDelayMs} ms after START${parsed.faults.length ? `; ${parsed.faults.length} fault(s) armed` : ''}`);
  const shutdown = () => void sim.stop().then(() => process.exit(0));
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

if (require.main === module) void main();
