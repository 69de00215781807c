/**
 * The one way to turn a charging-service configuration (as deployed, or as
 * being edited in the dialog) into ServiceClient options: used by the config
 * node and by Test connection alike, so that both check the same things.
 */
import type https from 'node:https';
import type { Node, NodeAPI } from 'node-red';
import type { ServiceClientOptions } from '../lib/client/service-client';
import { DEFAULT_API_KEY_HEADER, DEFAULT_MAX_IN_FLIGHT, SESSIONS_PATH, sessionsEndpoint } from '../lib/client/service-client';
import { isAuthMethod, parseTokenParams, tokenEndpoint } from '../lib/client/token-endpoint';
import { ChargingError } from '../lib/errors';
import { fleetKeyFor } from '../lib/fleet/redis/keys';
import { parseRedisUrl } from '../lib/fleet/redis/url';
import { chargingSessionSettings, checkEndpointPath, checkEndpointUrl, isLoopback, positiveNumber, resolveEnvReference } from '../lib/settings';

export interface ServiceSettings {
  baseUrl?: unknown;
  authUrl?: unknown;
  scope?: unknown;
  authMethod?: unknown;
  /** seconds */
  timeout?: unknown;
  maxInFlight?: unknown;
  /** requests per second, decimals allowed; empty or 0: no limit */
  maxRequestsPerSec?: unknown;
  allowInsecureHttp?: unknown;
  /** id of a tls-config node */
  tls?: unknown;
  /** the header an API gateway reads its key from (default x-api-key) */
  apiKeyHeader?: unknown;
  /** extra token request parameters, key=value&key2=value2 */
  tokenParams?: unknown;
  /** Coordinate replicas: the fleet's name in Redis; empty = derived from the base URL, token URL and client ID */
  fleetKey?: unknown;
  /** id of a tls-config node for a rediss:// Redis with a private CA or a client certificate */
  fleetTls?: unknown;
}

export interface Credentials {
  clientId?: string;
  clientSecret?: string;
  /** an API gateway's key (password field): sent on service requests only */
  apiKey?: string;
  /** Coordinate replicas: redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URL (may hold passwords, so a credential); empty = off */
  coordination?: string;
}

interface TlsConfigNode extends Node {
  /** false when Node-RED's tls-config node could not load its files (it logs why, once, at deploy) */
  valid?: boolean;
  addTLSOptions(opts: Record<string, unknown>): void;
}

/** Where credentials left empty in the dialog are read from: set by whoever runs Node-RED (and by npm start). */
export const ENV_CLIENT_ID = 'CHARGING_CLIENT_ID';
export const ENV_CLIENT_SECRET = 'CHARGING_CLIENT_SECRET';

/**
 * The credentials to use: those typed in the dialog, or, for a field left empty,
 * the process's environment. Lets one flow file run unchanged against the
 * simulator and production, with the secret kept out of flows_cred.json.
 */
export function effectiveCredentials(credentials: Credentials, env: NodeJS.ProcessEnv = process.env): Credentials {
  const clientId = credentials.clientId || env[ENV_CLIENT_ID] || undefined;
  const clientSecret = credentials.clientSecret || env[ENV_CLIENT_SECRET] || undefined;
  return { clientId, clientSecret };
}

/**
 * Client options, and warnings to log (plain http allowed to a remote host);
 * throws a CONFIG error saying what to fix. URLs may be `${NAME}` (see
 * resolveEnvReference); empty credentials come from the environment.
 */
export function clientOptions(RED: NodeAPI, settings: ServiceSettings, typed: Credentials, env: NodeJS.ProcessEnv = process.env): { options: ServiceClientOptions; warnings: string[] } {
  const allowHttp = settings.allowInsecureHttp === true;
  const base = checkEndpointUrl('Base URL', resolveEnvReference('Base URL', settings.baseUrl, env), allowHttp);
  const auth = checkEndpointUrl('Token URL', resolveEnvReference('Token URL', settings.authUrl, env), allowHttp);
  checkEndpointPath('Base URL', sessionsEndpoint(base.url), SESSIONS_PATH);
  checkEndpointPath('Token URL', tokenEndpoint(auth.url), '/token');
  const credentials = effectiveCredentials(typed, env);
  if (!credentials.clientId) throw new ChargingError('CONFIG', `The client ID is not set in the charging-service configuration (nor ${ENV_CLIENT_ID} in Node-RED's environment)`);
  if (!credentials.clientSecret) throw new ChargingError('CONFIG', `The client secret is not set in the charging-service configuration (nor ${ENV_CLIENT_SECRET} in Node-RED's environment)`);
  if (settings.authMethod !== undefined && settings.authMethod !== '' && !isAuthMethod(settings.authMethod)) {
    throw new ChargingError('CONFIG', 'Authentication is not one of basic, basic-form-encoded, client_secret_post', { field: 'authMethod' });
  }
  const options: ServiceClientOptions = {
    baseUrl: base.url,
    authUrl: auth.url,
    scope: typeof settings.scope === 'string' ? settings.scope : '',
    authMethod: isAuthMethod(settings.authMethod) ? settings.authMethod : 'basic',
    clientId: credentials.clientId,
    clientSecret: credentials.clientSecret,
    timeoutMs: positiveNumber(settings.timeout, 10, 1, 300) * 1000,
    maxInFlight: Math.round(positiveNumber(settings.maxInFlight, DEFAULT_MAX_IN_FLIGHT, 1, 256)),
    maxRequestsPerSec: requestsPerSec(settings.maxRequestsPerSec),
    tls: tlsOptions(RED, typeof settings.tls === 'string' ? settings.tls : undefined),
    ...gatewayOptions(settings, typed, env),
  };
  return { options, warnings: [base.warning, auth.warning].filter((w): w is string => !!w) };
}

/** Max requests per second: empty or 0 is no limit; anything else must be a positive number (decimals allowed). */
function requestsPerSec(value: unknown): number {
  if (value === undefined || value === null || String(value).trim() === '') return 0;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 10_000) {
    throw new ChargingError('CONFIG', 'Max requests per second is not a number from 0 to 10000 (0 or empty: no limit; decimals allowed, e.g. 0.5)', { field: 'maxRequestsPerSec' });
  }
  return n;
}

/** Header names the client sets itself, or that a proxy or Node reads: an API key may not take their place. */
const RESERVED_HEADERS = new Set(['authorization', 'accept', 'content-type', 'content-length', 'host', 'connection', 'transfer-encoding', 'proxy-authorization', 'user-agent']);

/** API key, its header and the extra token parameters; each may be `${NAME}`. */
function gatewayOptions(settings: ServiceSettings, typed: Credentials, env: NodeJS.ProcessEnv): Pick<ServiceClientOptions, 'apiKey' | 'apiKeyHeader' | 'tokenParams'> {
  const rawKey = typeof typed.apiKey === 'string' ? typed.apiKey.trim() : '';
  const apiKey = rawKey ? String(resolveEnvReference('API key', rawKey, env)) : undefined;
  const rawHeader = typeof settings.apiKeyHeader === 'string' ? settings.apiKeyHeader.trim() : '';
  const apiKeyHeader = rawHeader ? String(resolveEnvReference('API key header', rawHeader, env)).trim() : DEFAULT_API_KEY_HEADER;
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(apiKeyHeader)) throw new ChargingError('CONFIG', 'API key header is not a valid HTTP header name', { field: 'apiKeyHeader' });
  if (RESERVED_HEADERS.has(apiKeyHeader.toLowerCase())) throw new ChargingError('CONFIG', `API key header may not be ${apiKeyHeader}: the client sets that header itself`);
  return { apiKey, apiKeyHeader, tokenParams: parseTokenParams(resolveEnvReference('Token parameters', settings.tokenParams, env)) };
}

function tlsOptions(RED: NodeAPI, tlsId: string | undefined): https.AgentOptions | undefined {
  if (!tlsId || tlsId === '_ADD_') return undefined;
  const tlsNode = RED.nodes.getNode(tlsId) as TlsConfigNode | null;
  // The id comes from the dialog's request as well: another node's id, or a key such as __proto__ that a plain-object lookup answers, is not a TLS configuration.
  if (!tlsNode || tlsNode.type !== 'tls-config' || typeof tlsNode.addTLSOptions !== 'function') throw new ChargingError('CONFIG', 'The selected TLS configuration could not be found (deploy it first)');
  // Such a node silently adds no certificate, key or CA: requests would go out without them and fail later, far from the cause.
  if (tlsNode.valid === false) {
    throw new ChargingError('CONFIG', `The TLS configuration "${tlsNode.name || tlsNode.id}" could not load its certificate, key or CA file (see the log at deploy): fix the file paths, or upload the files in the TLS configuration`);
  }
  const opts: Record<string, unknown> = {};
  tlsNode.addTLSOptions(opts);
  return opts as https.AgentOptions;
}

/** What a configuration needs to open its Fleet (docs/fleet.md); null when *Coordinate replicas* is empty. */
export interface FleetSettings {
  /** redis://, rediss://, redis-sentinel:// or rediss-sentinel://, `${NAME}` expanded; may hold passwords: never logged */
  url: string;
  fleetKey: string;
  tls?: https.AgentOptions;
  /** settings.js chargingSession.fleet: cycle and lease (ms), for tests and for operators who want faster takeover */
  cycleMs?: number;
  leaseMs?: number;
  /** to log (and show in Test connection): a remote Redis over plain redis://, where the fleet's token and data cross the network in clear */
  warning?: string;
}

/**
 * The coordination settings of a configuration, or null when it is off (the
 * default). Throws a CONFIG error naming the field for a URL that is not
 * redis://, rediss://, redis-sentinel:// or rediss-sentinel://, or a fleet key
 * it cannot use. Loads no Redis client.
 */
export function fleetSettings(RED: NodeAPI, settings: ServiceSettings, typed: Credentials, options: ServiceClientOptions, env: NodeJS.ProcessEnv = process.env): FleetSettings | null {
  const raw = typeof typed.coordination === 'string' ? typed.coordination.trim() : '';
  if (raw === '') return null;
  const url = String(resolveEnvReference('Coordinate replicas', raw, env)).trim();
  if (!/^rediss?(-sentinel)?:\/\/[^/]/i.test(url)) {
    throw new ChargingError('CONFIG', 'Coordinate replicas: the Redis URL must start with redis://, rediss://, redis-sentinel:// or rediss-sentinel:// (for example redis://redis:6379, rediss://:password@redis.example:6380, or redis-sentinel://s1:26379,s2:26379,s3:26379/mymaster)', { field: 'coordination' });
  }
  // A malformed URL is said at deploy, with the field, rather than by the connection later (parseRedisUrl: no password in its words).
  parseRedisUrl(url);
  const given = typeof settings.fleetKey === 'string' ? settings.fleetKey : '';
  const fleetKey = fleetKeyFor({ baseUrl: options.baseUrl, tokenUrl: options.authUrl, clientId: options.clientId }, given);
  const tuning = chargingSessionSettings(RED.settings).fleet;
  return {
    url,
    fleetKey,
    tls: tlsOptions(RED, typeof settings.fleetTls === 'string' ? settings.fleetTls : undefined),
    cycleMs: tuning.cycleMs,
    leaseMs: tuning.leaseMs,
    warning: plainRemoteRedis(url),
  };
}

/** Plain http needs an opt-in; plain redis:// to another machine is at least said, since Redis holds the fleet's (encrypted) token. */
function plainRemoteRedis(url: string): string | undefined {
  const t = parseRedisUrl(url);
  if (t.tls) return undefined;
  const hosts = t.kind === 'server' ? [t.host] : t.sentinels.map((x) => x.host);
  if (hosts.every(isLoopback)) return undefined;
  const scheme = t.kind === 'server' ? 'redis://' : 'redis-sentinel://';
  return `Coordinate replicas: Redis is reached over plain ${scheme} on another machine: its password, the fleet's data and the encrypted token cross the network unencrypted. Use ${t.kind === 'server' ? 'rediss://' : 'rediss-sentinel://'}`;
}

/** The host of a service URL (no credentials, no path): what a configuration without a name is called in the log. */
export function hostOf(baseUrl: unknown): string | undefined {
  try {
    return new URL(String(baseUrl)).host;
  } catch {
    return undefined;
  }
}
