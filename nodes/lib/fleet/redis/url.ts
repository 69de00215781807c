/**
 * Where Redis is, from the *Coordinate replicas* URL (docs/replicas.md):
 *
 * - one server: redis://[user:password@]host[:port][/db], rediss://… (TLS);
 * - Redis Sentinel: redis-sentinel://[user:password@]host1:26379,host2:26379,host3:26379/<primary name>[?db=N]
 *   (rediss-sentinel://…: TLS to the sentinels and the data nodes). The
 *   password before the hosts is the data nodes'; the sentinels' own, when
 *   they have one, is `sentinelPassword=` (and `sentinelUsername=`) in the query.
 *
 * A URL that is not one is a CONFIG error whose text holds no password: the
 * URL itself is never repeated, only fixed words and the parts a person can
 * check (scheme, hosts, the primary's name).
 */
import net from 'node:net';
import { ChargingError } from '../../errors';

export interface Endpoint {
  host: string;
  port: number;
}

interface Common {
  db: number;
  tls: boolean;
  username?: string;
  password?: string;
  /** scheme, hosts, ports, db (and the primary's name): no credentials, safe for any message */
  where: string;
}

export interface ServerTarget extends Common, Endpoint {
  kind: 'server';
}

export interface SentinelTarget extends Common {
  kind: 'sentinel';
  sentinels: Endpoint[];
  /** the primary's name the sentinels monitor */
  name: string;
  sentinelUsername?: string;
  sentinelPassword?: string;
}

export type RedisTarget = ServerTarget | SentinelTarget;

export const SENTINEL_PORT = 26379;
/** at most this many sentinels in one URL (three or five is the usual deployment) */
const MAX_SENTINELS = 9;
/** a Sentinel primary name as the sentinel.conf's `sentinel monitor <name>` takes one, within reason */
const PRIMARY_NAME = /^[A-Za-z0-9._:-]{1,64}$/;
const SENTINEL_QUERY = new Set(['db', 'sentinelPassword', 'sentinelUsername']);

const FORMS = 'write redis://host:6379, rediss://host:6380, or redis-sentinel://host1:26379,host2:26379,host3:26379/<primary name> (with :password@ before the host(s) when Redis needs one)';

function configError(text: string): ChargingError {
  return new ChargingError('CONFIG', `Coordinate replicas: ${text}`, { field: 'coordination' });
}

/** Reads a *Coordinate replicas* URL; a CONFIG error (with no password in it) when it is not one. */
export function parseRedisUrl(url: string): RedisTarget {
  const text = typeof url === 'string' ? url.trim() : '';
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (scheme === 'redis-sentinel' || scheme === 'rediss-sentinel') return parseSentinelUrl(text, scheme === 'rediss-sentinel');
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw configError(`the Redis URL is not a URL; ${FORMS}`);
  }
  const tls = parsed.protocol === 'rediss:';
  if (!tls && parsed.protocol !== 'redis:') throw configError(`the Redis URL must start with redis://, rediss://, redis-sentinel:// or rediss-sentinel://, not ${parsed.protocol}//`);
  if (!parsed.hostname) throw configError('the Redis URL has no host');
  const db = dbOf(parsed.pathname.replace(/^\//, ''));
  const port = parsed.port ? Number(parsed.port) : 6379;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const target: ServerTarget = { kind: 'server', host, port, db, tls, where: `${parsed.protocol}//${parsed.host}${db ? `/${db}` : ''}` };
  if (parsed.username) target.username = decoded(parsed.username, 'the user name');
  if (parsed.password) target.password = decoded(parsed.password, 'the password');
  return target;
}

/**
 * redis-sentinel://[user:password@]h1[:p1],h2[:p2],…/<name>[?db=N&sentinelPassword=…]: several hosts
 * are not a WHATWG URL, so the parts are cut by hand, each by a linear scan.
 */
function parseSentinelUrl(text: string, tls: boolean): SentinelTarget {
  const scheme = tls ? 'rediss-sentinel' : 'redis-sentinel';
  const rest = text.slice(scheme.length + 3);
  const hashAt = rest.indexOf('#');
  const noHash = hashAt < 0 ? rest : rest.slice(0, hashAt);
  const queryAt = noHash.indexOf('?');
  const beforeQuery = queryAt < 0 ? noHash : noHash.slice(0, queryAt);
  const slash = beforeQuery.indexOf('/');
  const authority = slash < 0 ? beforeQuery : beforeQuery.slice(0, slash);
  const path = slash < 0 ? '' : beforeQuery.slice(slash + 1);
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at);
  let sentinels: Endpoint[];
  try {
    sentinels = endpointsOf(at < 0 ? authority : authority.slice(at + 1));
  } catch (err) {
    // A raw / ? or # in a password cuts the hosts short before its '@': the hosts look wrong, the password is the cause.
    if (at >= 0 || !rest.includes('@')) throw err;
    throw configError(`${(err as Error).message.replace(/^Coordinate replicas: /, '')}; a password with / ? # or @ in it must be %-encoded (%2F %3F %23 %40)`);
  }
  const name = decoded(path.replace(/\/$/, ''), 'the primary name');
  if (!PRIMARY_NAME.test(name)) throw configError(`the Sentinel URL must name the primary after the hosts (${scheme}://host1:26379,host2:26379,host3:26379/mymaster): letters, digits, . _ : - (up to 64)`);
  const query = queryOf(queryAt < 0 ? '' : noHash.slice(queryAt + 1));
  const db = dbOf(query.get('db') ?? '');
  const hosts = sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`).join(',');
  const target: SentinelTarget = { kind: 'sentinel', sentinels, name, db, tls, where: `${scheme}://${hosts}/${name}${db ? `?db=${db}` : ''}` };
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  if (user) target.username = decoded(user, 'the user name');
  if (colon >= 0 && colon < userinfo.length - 1) target.password = decoded(userinfo.slice(colon + 1), 'the password');
  const sp = query.get('sentinelPassword');
  const su = query.get('sentinelUsername');
  if (sp) target.sentinelPassword = sp;
  if (su) target.sentinelUsername = su;
  return target;
}

/**
 * The query's words, each %-decoded as the password before the hosts is: a '+' stays a '+' (form decoding would make
 * the '+' of a base64 sentinel password a space, and the sentinel would refuse it). An unknown word is named only when
 * it is one (a plain word followed by '='): anything else may be a password put in the wrong place.
 */
function queryOf(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of text.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    if (!SENTINEL_QUERY.has(key)) {
      const word = eq > 0 && /^[A-Za-z][A-Za-z0-9_]{0,39}$/.test(key) ? key : 'that';
      throw configError(`the Sentinel URL takes db, sentinelPassword and sentinelUsername in its query, not ${word}`);
    }
    if (!out.has(key)) out.set(key, decoded(eq < 0 ? '' : part.slice(eq + 1), `${key} in the query`));
  }
  return out;
}

/** "h1:26379,h2,[::1]:26380" → endpoints (port 26379 when none is given). */
function endpointsOf(list: string): Endpoint[] {
  if (list === '') throw configError('the Sentinel URL has no sentinel host: redis-sentinel://host1:26379,host2:26379,host3:26379/mymaster');
  const parts = list.split(',');
  if (parts.length > MAX_SENTINELS) throw configError(`the Sentinel URL lists ${parts.length} sentinels; at most ${MAX_SENTINELS}`);
  const seen = new Set<string>();
  return parts.map((part) => {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::(\d{1,5}))?$/.exec(part.trim());
    const port = m?.[3] === undefined ? SENTINEL_PORT : Number(m[3]);
    if (!m || port < 1 || port > 65535) throw configError('each sentinel in the Sentinel URL must be host or host:port, separated by commas (redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster)');
    // One IPv6 address has many spellings ([::1], [0:0:0:0:0:0:0:1]): written twice, one sentinel would vote twice.
    const host = m[1] !== undefined ? ipv6(m[1]) : m[2].toLowerCase();
    if (host === '' || host.length > 253) throw configError('each sentinel in the Sentinel URL must be a host name (up to 253 characters), an IPv4 address or an [IPv6] address');
    const key = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    if (seen.has(key)) throw configError(`the Sentinel URL lists ${key} twice`);
    seen.add(key);
    return { host, port };
  });
}

/** The address in its one canonical spelling; '' when it is none. */
function ipv6(text: string): string {
  if (!net.isIPv6(text)) return '';
  return new URL(`http://[${text}]/`).hostname.slice(1, -1);
}

function dbOf(text: string): number {
  const db = text === '' ? 0 : Number(text);
  if (!/^\d{0,5}$/.test(text) || !Number.isInteger(db) || db < 0) throw configError('the database in the Redis URL must be a number (redis://host:6379/0, or ?db=0 after a Sentinel URL)');
  return db;
}

function decoded(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw configError(`${what} in the Redis URL is not properly %-encoded`);
  }
}

export function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
