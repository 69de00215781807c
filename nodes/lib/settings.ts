import { ChargingError } from './errors';

/**
 * Checks a URL the user typed for the service or the token endpoint. https is
 * required unless the host is this machine or the user ticked "allow insecure
 * http": credentials and tokens would otherwise cross the network in clear.
 * Returns a warning to log when insecure http was allowed for a remote host.
 */
export function checkEndpointUrl(label: string, raw: unknown, allowInsecureHttp: boolean): { url: string; warning?: string } {
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new ChargingError('CONFIG', `${label} is not set in the charging-service configuration`);
  }
  // No message below quotes the value: it may have come from the environment, and may be a secret put in the wrong field.
  const value = raw.trim();
  if (value.length > MAX_URL_LENGTH) throw new ChargingError('CONFIG', `${label} is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ChargingError('CONFIG', `${label} is not a valid URL`);
  }
  if (url.username || url.password) {
    throw new ChargingError('CONFIG', `${label} must not contain a user name or password; use the client ID and secret fields`);
  }
  if (url.protocol === 'https:') return { url: value };
  if (url.protocol !== 'http:') throw new ChargingError('CONFIG', `${label} must start with https://`);
  if (isLoopback(url.hostname)) return { url: value };
  if (!allowInsecureHttp) {
    throw new ChargingError(
      'CONFIG',
      `${label} uses plain http to a host other than this machine: credentials and tokens would travel unencrypted. Use https, or tick "Allow insecure http" in the configuration.`,
    );
  }
  return { url: value, warning: `${label} uses plain http to ${url.host}: credentials and tokens travel unencrypted` };
}

/** Longer is no service's address; the bound also keeps every later look at the URL short. */
export const MAX_URL_LENGTH = 2048;

/**
 * The text without its trailing slashes. A loop, not `/\/+$/`: that regex
 * tries every slash of a long run as a start and is quadratic in their number.
 */
export function trimTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x2f) end--;
  return text.slice(0, end);
}

/** `${NAME}`: the whole value names an environment variable, as Node-RED reads it. */
const ENV_REFERENCE = /^\$\{(\S+)\}$/;

/** The variable a value refers to (`${CHARGING_BASE_URL}` gives CHARGING_BASE_URL), or undefined. */
export function envReference(raw: unknown): string | undefined {
  return typeof raw === 'string' ? ENV_REFERENCE.exec(raw.trim())?.[1] : undefined;
}

/**
 * A configuration value that may be `${NAME}`. Node-RED replaces such values
 * when it deploys a node, from the flow's and the process's environment; one
 * still here is a variable that is not set (at run time), or a value the dialog
 * sent as typed (Test connection), which is looked up in `env`.
 */
export function resolveEnvReference(label: string, raw: unknown, env: NodeJS.ProcessEnv): unknown {
  const name = envReference(raw);
  if (name === undefined) return raw;
  const value = env[name];
  if (value === undefined || value === '') {
    throw new ChargingError('CONFIG', `${label} is \${${name}}, but the environment variable ${name} is not set for Node-RED`);
  }
  return value;
}

export function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/** A positive number from an editor field, or the default. */
export function positiveNumber(raw: unknown, fallback: number, min: number, max: number): number {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
  if (!Number.isFinite(n)) return fallback;
  return Math.min(max, Math.max(min, n));
}

/**
 * The wait timeout of charging-start, charging-stop and charging-control
 * (until started or ended, make sure it ends, a START or STOP awaited), in ms:
 * 60 s when empty or unreadable, at most 1 h. The dialogs ask for 1 s or more;
 * the floor here only keeps a flow written by hand (or a test compressing time)
 * from a wait of zero.
 */
export function waitTimeoutMs(raw: unknown): number {
  return positiveNumber(raw, 60, 0.1, 3600) * 1000;
}

/** Shortest poll interval unless settings.js says otherwise. */
export const DEFAULT_MIN_POLL_INTERVAL_SEC = 5;

/** settings.js `chargingSession`: what an operator sets for every node of the package, read once and typed. */
export interface ChargingSessionSettings {
  /** the shortest poll or check interval the nodes may use, s (default 5: protects the operator's rate limits) */
  minPollIntervalSec: number;
  /** coordination tuning (cycle and lease, ms): for tests and for operators who want faster takeover; under 50 ms is ignored */
  fleet: { cycleMs?: number; leaseMs?: number };
}

/** Reads `chargingSession` from the runtime's settings (RED.settings); what is absent or of the wrong type is left undefined. */
export function chargingSessionSettings(runtimeSettings: unknown): ChargingSessionSettings {
  const raw = (runtimeSettings as { chargingSession?: { minPollIntervalSec?: unknown; fleet?: { cycleMs?: unknown; leaseMs?: unknown } } } | undefined)?.chargingSession;
  const min = raw?.minPollIntervalSec;
  const ms = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 50 ? v : undefined);
  return {
    minPollIntervalSec: typeof min === 'number' && Number.isFinite(min) && min >= 0 ? min : DEFAULT_MIN_POLL_INTERVAL_SEC,
    fleet: { cycleMs: ms(raw?.fleet?.cycleMs), leaseMs: ms(raw?.fleet?.leaseMs) },
  };
}

/**
 * Refuses an endpoint whose fixed path (`/v1/token`, `/poi/v1/charging-sessions`)
 * a `?` or `#` in the configured URL cancelled: `https://host/any/path?` would
 * otherwise reach any path of any host. Checked on the endpoint as built, so
 * that a rule which keeps the path before a query passes.
 */
export function checkEndpointPath(label: string, endpoint: string, path: string): void {
  let pathname = '';
  try {
    pathname = new URL(endpoint).pathname;
  } catch {
    // unreadable: refused below
  }
  if (!pathname.endsWith(path)) throw new ChargingError('CONFIG', `${label}: a ? or # in it would cancel the path ${path} the client appends; remove them`);
}
