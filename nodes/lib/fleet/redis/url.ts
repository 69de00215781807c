/**
 * Where Redis is, from the *Coordinate replicas* URL: redis://[user:password@]host[:port][/db]
 * or rediss://… (TLS). A URL that is not one is a CONFIG error whose text holds
 * no password: the URL itself is never repeated.
 */
import { ChargingError } from '../../errors';

export interface RedisTarget {
  host: string;
  port: number;
  db: number;
  tls: boolean;
  username?: string;
  password?: string;
  /** scheme, host, port and db: no credentials, safe for any message */
  where: string;
}

/** Reads a redis:// or rediss:// URL; a CONFIG error (with no password in it) when it is not one. */
export function parseRedisUrl(url: string): RedisTarget {
  const text = typeof url === 'string' ? url.trim() : '';
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new ChargingError('CONFIG', 'Coordinate replicas: the Redis URL is not a URL; write redis://host:6379 or rediss://host:6380 (with :password@ before the host when Redis needs one)', { field: 'coordination' });
  }
  const tls = parsed.protocol === 'rediss:';
  if (!tls && parsed.protocol !== 'redis:') {
    throw new ChargingError('CONFIG', `Coordinate replicas: the Redis URL must start with redis:// or rediss://, not ${parsed.protocol}//`, { field: 'coordination' });
  }
  if (!parsed.hostname) throw new ChargingError('CONFIG', 'Coordinate replicas: the Redis URL has no host', { field: 'coordination' });
  const dbText = parsed.pathname.replace(/^\//, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) throw new ChargingError('CONFIG', 'Coordinate replicas: the database in the Redis URL must be a number (redis://host:6379/0)', { field: 'coordination' });
  const port = parsed.port ? Number(parsed.port) : 6379;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const target: RedisTarget = { host, port, db, tls, where: `${parsed.protocol}//${parsed.host}${db ? `/${db}` : ''}` };
  if (parsed.username) target.username = decodeURIComponent(parsed.username);
  if (parsed.password) target.password = decodeURIComponent(parsed.password);
  return target;
}

export function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
