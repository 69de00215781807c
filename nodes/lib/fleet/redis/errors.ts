/**
 * Any failure from ioredis or Redis as a ChargingError: words a person can act
 * on, the password redacted first and the text cut after. The code says what
 * a caller may do: NETWORK and TIMEOUT (retryable: Redis away or busy), CONFIG
 * (a wrong password or permission: waiting does not help), INTERNAL (anything
 * else Redis said).
 */
import { ChargingError } from '../../errors';
import { tlsHint } from '../../client/classify';

export interface ErrorContext {
  /** "Coordinate replicas (Redis at redis://host:6379)" */
  prefix: string;
  /** whether the URL asked for TLS (a reset on a plain URL hints at a TLS port) */
  tls: boolean;
  redact(text: string): string;
  /** a Sentinel URL: it holds two passwords (the data nodes' before the hosts, the sentinels' in the query), so the words say which */
  sentinel?: boolean;
}

export function redisError(err: unknown, what: string, ctx: ErrorContext): ChargingError {
  if (err instanceof ChargingError) return err;
  const e = err as { message?: string; code?: string } | undefined;
  // Redis's own error texts are one line; a longer one (a hostile server) is read no further than this.
  const raw = ctx.redact(String(e?.message ?? err)).slice(0, 4096);
  const code = typeof e?.code === 'string' ? e.code : '';
  const at = `${ctx.prefix}: ${what}`;
  if (/WRONGPASS|invalid password|invalid username-password/i.test(raw)) {
    const which = ctx.sentinel ? "the primary refused the data nodes' user name or password (the one before the hosts; the sentinels accepted theirs)" : 'Redis refused the user name or password in the URL';
    return new ChargingError('CONFIG', `${at}: ${which} (WRONGPASS)`, { cause: 'WRONGPASS' });
  }
  if (/NOAUTH/.test(raw)) {
    const where = ctx.sentinel ? "the primary needs the data nodes' password: put it before the hosts (redis-sentinel://:password@h1:26379,h2:26379,h3:26379/name)" : 'Redis needs a password: put it in the URL (redis://:password@host:port)';
    return new ChargingError('CONFIG', `${at}: ${where}`, { cause: 'NOAUTH' });
  }
  if (/NOPERM/.test(raw)) return new ChargingError('CONFIG', `${at}: the Redis user may not run this command (NOPERM): it needs string, hash, set, sorted set, scripting and TIME commands on the fleet's keys`, { cause: 'NOPERM' });
  const tlsCode = tlsFailure(code, raw);
  if (tlsCode) return new ChargingError('NETWORK', `${at}: the TLS handshake failed (${tlsCode}): ${tlsHint(tlsCode)}`, { cause: tlsCode, retryable: true });
  if (/Command timed out/i.test(raw)) return new ChargingError('TIMEOUT', `${at}: no answer from Redis in time`, { cause: 'ETIMEDOUT', retryable: true });
  if (code === 'ETIMEDOUT' || /connect ETIMEDOUT/.test(raw)) return new ChargingError('TIMEOUT', `${at}: could not connect in time (ETIMEDOUT)`, { cause: 'ETIMEDOUT', retryable: true });
  if (/^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EPIPE)$/.test(code)) {
    const hint = code === 'ECONNRESET' && !ctx.tls ? ' (if this port speaks TLS, the URL must start with rediss://)' : '';
    return new ChargingError('NETWORK', `${at}: could not reach Redis (${code})${hint}`, { cause: code, retryable: true });
  }
  if (/enableOfflineQueue|Connection is closed|MaxRetriesPerRequest|Stream isn't writeable|Command aborted/i.test(raw)) {
    return new ChargingError('NETWORK', `${at}: not connected to Redis`, { cause: 'NOT_CONNECTED', retryable: true });
  }
  if (/LOADING|BUSY|MASTERDOWN|READONLY|TRYAGAIN|CLUSTERDOWN|NOREPLICAS/.test(raw)) {
    return new ChargingError('NETWORK', `${at}: Redis cannot serve us now (${raw.split(' ')[0]})`, { cause: raw.split(' ')[0], retryable: true });
  }
  return new ChargingError('INTERNAL', `${at}: ${raw.slice(0, 300)}`);
}

/** ioredis's words for a command refused before it was written (no offline queue, not connected): it surely did not run. */
export const NOT_SENT = /Stream isn't writeable|enableOfflineQueue/;

function tlsFailure(code: string, message: string): string | null {
  if (/CERT|SELF_SIGNED|UNABLE_TO|ERR_SSL|ERR_TLS|EPROTO|HOSTNAME_MISMATCH/.test(code)) return code;
  const m = /(self[- ]signed certificate|unable to verify|certificate has expired|Hostname\/IP does not match|wrong version number|alert)/i.exec(message);
  return m ? code || m[1].toUpperCase().replace(/[^A-Z]+/g, '_') : null;
}
