/**
 * One Redis connection for the coordination of replicas (docs/fleet.md), with
 * every wait bounded and every failure a ChargingError that names the server
 * and never its password.
 *
 * - Bounded: connectTimeout, commandTimeout, maxRetriesPerRequest 1 and no
 *   offline queue, so a command sent while Redis is away fails at once instead
 *   of piling up in memory until Redis comes back. Before the first connection
 *   (a replica starting) a command waits for it, up to connectTimeoutMs.
 * - Health: up from the first `ready`, down when the connection drops or a
 *   command gets no answer in time (a frozen Redis keeps its sockets open),
 *   up again at the next command that succeeds. Listeners hear each change
 *   once, so a node can say it once on its status and in its log.
 * - Closed: after close() nothing is sent; every call fails with CLOSED.
 * - Scripts run with EVALSHA and fall back to EVAL once when Redis has
 *   forgotten them (a restarted Redis starts with an empty script cache).
 */
import { createHash } from 'node:crypto';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Redis, type RedisOptions } from 'ioredis';
import { ChargingError } from '../errors';
import { Redactor } from '../client/redactor';
import { tlsHint } from '../client/classify';

export interface FleetConnectionOptions {
  /** redis://[user:password@]host[:port][/db] or rediss://…; `${NAME}` already expanded by the caller */
  url: string;
  /** for rediss://: a private CA, a client certificate, … (Node's tls options) */
  tls?: TlsOptions;
  /** longest wait for a TCP (and TLS) connection and the server's ready answer (default 5 s) */
  connectTimeoutMs?: number;
  /** longest wait for the answer to one command (default 2 s) */
  commandTimeoutMs?: number;
  /** shown in Redis's CLIENT LIST, to tell replicas apart */
  name?: string;
}

export interface FleetHealth {
  up: boolean;
  /** why it is down, in words (redacted); null when up */
  reason: string | null;
  /** epoch ms of the change */
  at: number;
}

export type HealthListener = (health: FleetHealth) => void;

export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;
/** Pause between reconnection attempts: 100 ms, doubling, at most this. */
export const MAX_RECONNECT_PAUSE_MS = 2_000;

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

/** A Lua script run by its SHA1, sent whole only when Redis does not know it yet. */
export class Script {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly lua: string,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
}

export class FleetConnection {
  readonly target: RedisTarget;
  private readonly redis: Redis;
  private readonly redactor = new Redactor();
  private readonly listeners = new Set<HealthListener>();
  private state: FleetHealth;
  private everUp = false;
  private downReported = false;
  private closed = false;
  private firstReady: Promise<void> | null = null;
  private lastError: ChargingError | null = null;
  private readonly connectTimeoutMs: number;

  constructor(options: FleetConnectionOptions) {
    this.target = parseRedisUrl(options.url);
    this.redactor.add(this.target.password);
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.state = { up: false, reason: 'not connected yet', at: Date.now() };
    this.redis = new Redis(this.redisOptions(options));
    this.listen();
  }

  /** Where Redis is, without credentials: for messages and the status. */
  get where(): string {
    return this.target.where;
  }

  get health(): FleetHealth {
    return this.state;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Tells the listener about every change of health from now on; returns the way to stop. */
  onHealth(listener: HealthListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Connects (the constructor does not), and resolves once Redis answered, or
   * rejects with the reason within connectTimeoutMs. Reconnection goes on in
   * the background until close().
   */
  open(): Promise<void> {
    if (this.closed) return Promise.reject(this.closedError());
    this.firstReady ??= new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(this.lastError ?? new ChargingError('TIMEOUT', `${this.prefix()}: no connection within ${this.connectTimeoutMs} ms`, { retryable: true }));
      }, this.connectTimeoutMs + 250);
      timer.unref?.();
      const onReady = () => {
        cleanup();
        resolve();
      };
      const onError = () => {
        // The first failure decides: a wrong password or a refused port does not get better by waiting.
        if (this.lastError && !this.everUp) {
          cleanup();
          reject(this.lastError);
        }
      };
      const cleanup = () => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
        this.redis.off('error', onError);
        this.redis.off('close', onError);
      };
      this.redis.on('ready', onReady);
      this.redis.on('error', onError);
      this.redis.on('close', onError);
      if (this.redis.status === 'wait') this.redis.connect().catch(() => undefined);
      else if (this.redis.status === 'ready') onReady();
    });
    const ready = this.firstReady;
    // Once failed, the next open() waits for the reconnection in progress.
    ready.catch(() => {
      if (this.firstReady === ready) this.firstReady = null;
    });
    return ready;
  }

  /**
   * Runs one operation on the connection: CLOSED after close(), waits for the
   * first connection (bounded), maps any failure to a ChargingError and keeps
   * the health up to date. `what` names the operation in the error message.
   */
  async run<T>(what: string, op: (redis: Redis) => Promise<T>): Promise<T> {
    if (this.closed) throw this.closedError();
    if (!this.everUp) {
      // Starting: wait for the first connection, unless it already failed (then fail fast, as when down later).
      if (this.lastError) throw this.lastError;
      await this.open();
    }
    if (this.closed) throw this.closedError();
    try {
      const result = await op(this.redis);
      this.markUp();
      return result;
    } catch (err) {
      if (this.closed) throw this.closedError();
      const error = this.toError(err, what);
      if (error.code === 'NETWORK' || error.code === 'TIMEOUT') this.markDown(error.message);
      throw error;
    }
  }

  /** Runs a Lua script by its SHA1; sends its text once when Redis answers NOSCRIPT. */
  async eval(script: Script, keys: string[], args: Array<string | number>): Promise<unknown> {
    return this.run(script.name, async (redis) => {
      try {
        return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!/NOSCRIPT/.test((err as Error)?.message ?? '')) throw err;
        return redis.eval(script.lua, keys.length, ...keys, ...args);
      }
    });
  }

  /** Text with the URL's password removed, in every form it can take. */
  redact(text: string): string {
    return this.redactor.redact(text);
  }

  /** Stops reconnecting, drops the connection; nothing is sent after this resolves. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    // disconnect(), not quit(): quit() would queue behind commands waiting for a frozen Redis.
    this.redis.disconnect(false);
  }

  private redisOptions(options: FleetConnectionOptions): RedisOptions {
    const t = this.target;
    return {
      host: t.host,
      port: t.port,
      db: t.db,
      username: t.username,
      password: t.password,
      tls: t.tls ? { servername: isIp(t.host) ? undefined : t.host, ...(options.tls ?? {}) } : undefined,
      connectionName: options.name,
      lazyConnect: true,
      connectTimeout: this.connectTimeoutMs,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      // A command whose answer was lost to a reconnect may have run: never sent twice behind the caller's back.
      // The caller reads back what it wrote (a claim) or retries under the same id (a commit).
      autoResendUnfulfilledCommands: false,
      // A socket that answers nothing while commands wait is dropped (a silent partition, a frozen Redis),
      // so that the next command fails at once instead of waiting out its timeout.
      socketTimeout: 2 * (options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS),
      keepAlive: 1_000,
      // A lost connection is re-established with a capped pause, until close().
      retryStrategy: (times: number) => (this.closed ? null : Math.min(MAX_RECONNECT_PAUSE_MS, 100 * 2 ** Math.min(times, 5))),
      // A failover can leave us on a read-only replica: reconnect (DNS then points at the new primary).
      reconnectOnError: (err: Error) => /READONLY/.test(err.message),
      showFriendlyErrorStack: false,
    };
  }

  private listen(): void {
    this.redis.on('ready', () => {
      this.everUp = true;
      this.lastError = null;
      this.markUp();
    });
    // ioredis emits 'error' for connection failures: an EventEmitter without a listener would throw.
    this.redis.on('error', (err: unknown) => {
      if (this.closed) return;
      this.lastError = this.toError(err, 'connect');
      this.markDown(this.lastError.message);
    });
    this.redis.on('close', () => {
      if (this.closed) return;
      this.markDown(this.lastError?.message ?? `${this.prefix()}: the connection was lost`);
    });
  }

  private markUp(): void {
    if (this.state.up || this.closed || this.redis.status !== 'ready') return;
    this.downReported = false;
    this.setHealth({ up: true, reason: null, at: Date.now() });
  }

  /** Down once per outage: the first reason is told, the failures that follow it are not. */
  private markDown(reason: string): void {
    if (this.closed || this.downReported) return;
    this.downReported = true;
    this.setHealth({ up: false, reason, at: Date.now() });
  }

  private setHealth(next: FleetHealth): void {
    this.state = next;
    for (const l of [...this.listeners]) {
      try {
        l(next);
      } catch {
        // a listener's failure is its own; the connection goes on
      }
    }
  }

  private prefix(): string {
    return `Coordinate replicas (Redis at ${this.target.where})`;
  }

  private closedError(): ChargingError {
    return new ChargingError('CLOSED', `${this.prefix()}: the coordination was closed (redeploy or shutdown)`);
  }

  /** Any failure from ioredis or Redis as a ChargingError: words a person can act on, the password redacted. */
  toError(err: unknown, what: string): ChargingError {
    if (err instanceof ChargingError) return err;
    const e = err as { message?: string; code?: string; name?: string } | undefined;
    // Redis's own error texts are one line; a longer one (a hostile server) is read no further than this.
    const raw = this.redact(String(e?.message ?? err)).slice(0, 4096);
    const code = typeof e?.code === 'string' ? e.code : '';
    const at = `${this.prefix()}: ${what}`;
    if (/WRONGPASS|invalid password|invalid username-password/i.test(raw)) {
      return new ChargingError('CONFIG', `${at}: Redis refused the user name or password in the URL (WRONGPASS)`, { cause: 'WRONGPASS' });
    }
    if (/NOAUTH/.test(raw)) return new ChargingError('CONFIG', `${at}: Redis needs a password: put it in the URL (redis://:password@host:port)`, { cause: 'NOAUTH' });
    if (/NOPERM/.test(raw)) return new ChargingError('CONFIG', `${at}: the Redis user may not run this command (NOPERM): it needs string, hash, set, sorted set, scripting and TIME commands on the fleet's keys`, { cause: 'NOPERM' });
    const tlsCode = tlsFailure(code, raw);
    if (tlsCode) return new ChargingError('NETWORK', `${at}: the TLS handshake failed (${tlsCode}): ${tlsHint(tlsCode)}`, { cause: tlsCode, retryable: true });
    if (/Command timed out/i.test(raw)) return new ChargingError('TIMEOUT', `${at}: no answer from Redis in time`, { cause: 'ETIMEDOUT', retryable: true });
    if (code === 'ETIMEDOUT' || /connect ETIMEDOUT/.test(raw)) return new ChargingError('TIMEOUT', `${at}: could not connect in time (ETIMEDOUT)`, { cause: 'ETIMEDOUT', retryable: true });
    if (/^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EPIPE)$/.test(code)) {
      const hint = code === 'ECONNRESET' && !this.target.tls ? ' (if this port speaks TLS, the URL must start with rediss://)' : '';
      return new ChargingError('NETWORK', `${at}: could not reach Redis (${code})${hint}`, { cause: code, retryable: true });
    }
    if (/enableOfflineQueue|Connection is closed|MaxRetriesPerRequest|Stream isn't writeable|Command aborted/i.test(raw)) {
      return new ChargingError('NETWORK', `${at}: not connected to Redis`, { cause: 'NOT_CONNECTED', retryable: true });
    }
    if (/LOADING|BUSY|MASTERDOWN|READONLY|TRYAGAIN|CLUSTERDOWN/.test(raw)) {
      return new ChargingError('NETWORK', `${at}: Redis cannot serve us now (${raw.split(' ')[0]})`, { cause: raw.split(' ')[0], retryable: true });
    }
    return new ChargingError('INTERNAL', `${at}: ${raw.slice(0, 300)}`);
  }
}

/**
 * Tells the failures of background work (the heartbeat, a watch cycle) once
 * per streak of the same failure, and not at all while health is down: the
 * health change has said it already, and a cycle every 2 s must not become a
 * log line every 2 s.
 */
export class FailureReporter {
  private last: string | null = null;

  constructor(
    private readonly connection: FleetConnection,
    private readonly sink?: (err: ChargingError) => void,
  ) {}

  failed(err: unknown, what: string): void {
    const error = this.connection.toError(err, what);
    if (error.code === 'CLOSED' || this.connection.isClosed || !this.connection.health.up || error.message === this.last) return;
    this.last = error.message;
    try {
      this.sink?.(error);
    } catch {
      // nothing left to tell
    }
  }

  succeeded(): void {
    this.last = null;
  }
}

function tlsFailure(code: string, message: string): string | null {
  if (/CERT|SELF_SIGNED|UNABLE_TO|ERR_SSL|ERR_TLS|EPROTO|HOSTNAME_MISMATCH/.test(code)) return code;
  const m = /(self[- ]signed certificate|unable to verify|certificate has expired|Hostname\/IP does not match|wrong version number|alert)/i.exec(message);
  return m ? code || m[1].toUpperCase().replace(/[^A-Z]+/g, '_') : null;
}

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
