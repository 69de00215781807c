/**
 * Test connection's look at Redis, for *Coordinate replicas* (docs/fleet.md):
 * connects with the URL being edited (or the stored one), bounded, and lists
 * the fleet's live replicas as their heartbeats describe them. Read-only: it
 * opens a bare FleetConnection, not a Fleet, so the test never joins the fleet
 * as a replica. The answer never holds the URL's password: FleetConnection's
 * errors are redacted, and every message is redacted again.
 */
import { ChargingError } from '../errors';
import { FleetConnection, type FleetConnectionOptions } from './redis/connection';
import { FleetKeys } from './redis/keys';
import { parseReplicaInfo } from './membership/replica-info';
import { LIVE_MEMBERS } from './membership/membership';

export interface ReplicaSeen {
  id: string;
  host?: string;
  pid?: number;
  /** watched tokens it polls (its last heartbeat) */
  owned: number;
}

export interface RedisAnswer {
  ok: boolean;
  message: string;
  /** the fleet key the configuration would use (not a secret) */
  fleetKey?: string;
  replicas?: ReplicaSeen[];
}

/** The Redis a configuration would join: its URL, TLS, fleet key, and what should be said of the URL (plain redis:// to another machine). */
export interface RedisToCheck {
  url: string;
  tls?: FleetConnectionOptions['tls'];
  fleetKey: string;
  warning?: string;
}

/** Bounds for the whole check: a dialog should not wait long for an unreachable Redis. */
const CONNECT_TIMEOUT_MS = 3_000;
const COMMAND_TIMEOUT_MS = 2_000;
const TYPED_URL_FAILED = 'Coordinate replicas: no Redis answered at the URL typed in the dialog (unreachable, refused, too slow or not Redis: the reason is said only for the deployed URL; deploy, and the log says it)';

/**
 * `stored`: the URL is the deployed one. A URL typed in the dialog gets one
 * answer for every failure (refused, unreachable, timed out, not Redis): told
 * apart, they would make the dialog a port scanner of the network Node-RED
 * sits in.
 */
export async function checkRedis(fleet: RedisToCheck, stored: boolean): Promise<RedisAnswer> {
  const { fleetKey } = fleet;
  const warning = fleet.warning ? ` ${fleet.warning}` : '';
  let connection: FleetConnection | null = null;
  try {
    connection = new FleetConnection({ url: fleet.url, tls: fleet.tls, connectTimeoutMs: CONNECT_TIMEOUT_MS, commandTimeoutMs: COMMAND_TIMEOUT_MS, name: 'chargectl-test-connection' });
    await connection.open();
    const keys = new FleetKeys(fleetKey);
    const replicas = liveReplicas((await connection.eval(LIVE_MEMBERS.call({ replicas: keys.replicas, info: keys.replicaInfo }, {}))) as unknown[]);
    const count = replicas.length === 0 ? 'no live replica (none deployed with this fleet key is running)' : `${replicas.length} live replica${replicas.length === 1 ? '' : 's'}`;
    return { ok: true, message: connection.redact(`Redis at ${connection.where} answers${sentinelSays(connection)}; fleet ${fleetKey}: ${count}${warning ? `.${warning}` : ''}`), fleetKey, replicas };
  } catch (err) {
    // Without a connection the URL did not parse: parseRedisUrl's CONFIG errors are fixed texts, anything else is not shown.
    const raw = err instanceof Error ? err.message : String(err);
    // A refusal by Redis itself (a wrong password: CONFIG) says no more about the network than a success would.
    const told = stored || (err instanceof ChargingError && err.code === 'CONFIG');
    const message = connection ? (told ? connection.redact(raw) : TYPED_URL_FAILED) : err instanceof ChargingError ? raw : 'Coordinate replicas: the Redis URL could not be read';
    return { ok: false, message: `${message}${warning}`, fleetKey };
  } finally {
    void connection?.close();
  }
}

/** On Sentinel: the primary the sentinels agree on, and how many of those listed answered. */
function sentinelSays(connection: FleetConnection): string {
  const found = connection.primary;
  const t = connection.target;
  if (!found || t.kind !== 'sentinel') return '';
  const replicas = `${found.replicas} healthy replica${found.replicas === 1 ? '' : 's'}`;
  return `: primary ${t.name} at ${found.primary.host}:${found.primary.port} (${found.answered} of ${found.listed} sentinels answered; ${replicas})`;
}

/** LIVE_MEMBERS's answer: the members whose heartbeat has not lapsed on Redis's clock, with what each says of itself. */
function liveReplicas(pairs: unknown[]): ReplicaSeen[] {
  const out: ReplicaSeen[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    const info = parseReplicaInfo(pairs[i + 1]);
    out.push({ id: String(pairs[i]), host: info.host, pid: info.pid, owned: info.owned ?? 0 });
  }
  return out;
}
