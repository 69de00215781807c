/**
 * What the fleet tests share: one real redis-server per file, library
 * instances standing in for replicas (each with its own connection and
 * replica id, as separate Node-RED processes have), closed after each test,
 * and a check that nothing was left as an unhandled rejection.
 */
import axios from 'axios';
import { Fleet, type FleetOptions } from '../../../nodes/lib/fleet/fleet';
import type { Claim } from '../../../nodes/lib/fleet/claims/claims';
import type { ClaimOutcome } from '../../../nodes/lib/coordination/claims';
import type { ChargingError } from '../../../nodes/lib/errors';
import { commandClaimKey, commandClaimPolicy, type ChargingCommand } from '../../../nodes/lib/session/commands';
import { tokenEndpoint, basicCredentials } from '../../../nodes/lib/client/token-endpoint';
import type { TokenResponse } from '../../../nodes/lib/client/token-cache';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { RedisServer, requireRedis } from '../../redis-server';
import { CLIENT_ID, CLIENT_SECRET } from '../../harness';

/** Short timings so that leases lapse and hand-overs happen within a test. */
export const FAST = { cycleMs: 150, leaseMs: 600, commandTimeoutMs: 400, connectTimeoutMs: 1_000 };

export interface FleetSuite {
  redis: RedisServer;
  /** opens a replica on the suite's Redis; closed after the test */
  replica(options?: Partial<FleetOptions>): Fleet;
  /** every fleet error and warning reported so far (text) */
  reported: string[];
}

let suiteCount = 0;

export function fleetSuite(): FleetSuite {
  const suite = { reported: [] as string[] } as FleetSuite;
  const fleets: Fleet[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  let fleetKey = '';
  before(async function () {
    requireRedis(this);
    suite.redis = await RedisServer.start();
    process.on('unhandledRejection', onUnhandled);
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await suite.redis?.close();
  });
  beforeEach(() => {
    // A fleet key per test: nothing one test left in Redis reaches the next.
    fleetKey = `test-${process.pid}-${++suiteCount}`;
    unhandled.length = 0;
    suite.reported.length = 0;
  });
  afterEach(async () => {
    await Promise.all(fleets.splice(0).map((f) => f.close()));
    if (suite.redis && !suite.redis.running) await suite.redis.start();
    if (unhandled.length > 0) throw new Error(`unhandled promise rejection: ${unhandled.map(String).join('; ')}`);
  });
  suite.replica = (options = {}) => {
    const f = new Fleet({
      url: suite.redis.url,
      fleetKey,
      ...FAST,
      onWarning: (t) => suite.reported.push(`warning: ${t}`),
      onError: (e) => suite.reported.push(`error: ${e.message}`),
      ...options,
    });
    fleets.push(f);
    return f;
  };
  return suite;
}

/** The account simulatorToken asks a token for, as the fleet names and seals it. */
export const IDENTITY = { tokenUrl: 'http://127.0.0.1/v1/token', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, scope: '', tokenParams: [] } as const;

/** The token request the client makes, sent to the simulator: a real HTTP exchange, counted there. */
export function simulatorToken(sim: ChargingServiceSimulator): () => Promise<TokenResponse> {
  return async () => {
    const res = await axios.post(tokenEndpoint(sim.authUrl), 'grant_type=client_credentials', {
      headers: { authorization: `Basic ${basicCredentials(CLIENT_ID, CLIENT_SECRET)}`, 'content-type': 'application/x-www-form-urlencoded' },
      timeout: 5_000,
    });
    const data = res.data as { access_token: string; expires_in?: number };
    return { accessToken: data.access_token, expiresIn: data.expires_in };
  };
}

/** Every key of Redis with its value in any type, as text: to look for what must not be there. */
export async function dumpRedis(redis: RedisServer): Promise<string> {
  const admin = redis.admin();
  const out: string[] = [];
  for (const key of await admin.keys('*')) {
    const type = await admin.type(key);
    const value =
      type === 'string' ? await admin.get(key) : type === 'hash' ? await admin.hgetall(key) : type === 'set' ? await admin.smembers(key) : type === 'zset' ? await admin.zrange(key, '0', '-1') : type;
    out.push(`${key} ${JSON.stringify(value)}`);
  }
  admin.disconnect();
  return out.join('\n');
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** until() for a condition that asks Redis. */
export async function eventually(cond: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Samples every 10 ms which replicas may poll each token; remembers the worst moment. */
export function ownershipSampler(replicas: () => Array<{ own: { holds(item: string): boolean } }>, tokens: string[]) {
  let worst = 0;
  let worstToken = '';
  const timer = setInterval(() => {
    for (const t of tokens) {
      const n = replicas().filter((r) => r.own.holds(t)).length;
      if (n > worst) [worst, worstToken] = [n, t];
    }
  }, 10);
  return {
    stop: () => clearInterval(timer),
    get worst() {
      return { owners: worst, token: worstToken };
    },
  };
}

/** What a START or STOP run through the fleet's claims came to, in the words the command tests use. */
export type CommandRun<T> =
  | { role: 'sent'; deduplicated: boolean; result: T }
  | { role: 'duplicate'; from: string; outcome: ClaimOutcome<T> }
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string };

/** A command through the fleet's claims as send-once runs it (its key and policy): `waitMs` the longest operation. */
export async function runCommand<T>(f: Fleet, cmd: ChargingCommand | FleetCommand, send: () => Promise<T>, waitMs: number, unshared: (err: ChargingError) => void = () => undefined): Promise<CommandRun<T>> {
  const c = asCommand(cmd);
  const run = await f.claims.run(commandClaimKey(c), send, commandClaimPolicy(c, waitMs), unshared);
  return run.role === 'ran' ? { role: 'sent', deduplicated: run.shared, result: run.result } : run;
}

/** A command's claim alone (the sender then publishes, or does not: a replica that died). */
export function claimCommand<T>(f: Fleet, cmd: ChargingCommand | FleetCommand, waitMs: number): Promise<Claim<T>> {
  const c = asCommand(cmd);
  return f.claims.claim<T>(commandClaimKey(c), { takeOver: c.action === 'STOP', waitMs });
}

/** The four fields that make a command "the same". */
export interface FleetCommand {
  action: 'START' | 'STOP';
  token: string;
  locationId: string;
  evseId: string | number;
}

function asCommand(cmd: ChargingCommand | FleetCommand): ChargingCommand {
  return { ...cmd, evseId: String(cmd.evseId) };
}
