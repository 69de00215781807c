/**
 * One Redis connection for the coordination of replicas (docs/fleet.md), with
 * every wait bounded and every failure a ChargingError that names the server
 * and never its password.
 *
 * - Bounded: connectTimeout, commandTimeout, maxRetriesPerRequest 1 and no
 *   offline queue, so a command sent while Redis is away fails at once instead
 *   of piling up in memory until Redis comes back. Before the first connection
 *   (a replica starting) a command waits for it, up to connectTimeoutMs.
 * - Health (health.ts): up from the first `ready`, down when the connection
 *   drops or a command gets no answer in time, up at the next command that
 *   succeeds.
 * - Closed: after close() nothing is sent; every call fails with CLOSED.
 * - Scripts (script.ts) run with EVALSHA and fall back to EVAL once when Redis
 *   has forgotten them (a restarted Redis starts with an empty script cache).
 * - Redis Sentinel (sentinel.ts): the primary a majority of the sentinels
 *   names, the connection moved at each +switch-master, and a durable script
 *   (a claim, a commit) confirmed by WAIT or by the sentinels before it counts.
 * - Another server behind the same address (a failover, a restart): its
 *   listeners are told (onServerChange), since it may lack the last writes.
 */
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { debuglog } from 'node:util';
import { Redis, type RedisOptions } from 'ioredis';
import { ChargingError } from '../../errors';
import { Redactor } from '../../client/redactor';
import { monotonicNow } from '../../clock';
import { redisError } from './errors';
import { Health, type FleetHealth, type HealthListener } from './health';
import type { ScriptCall } from './script';
import { primaryConnector, same, Sentinels, type PrimaryFound } from './sentinel';
import { isIp, parseRedisUrl, type Endpoint, type RedisTarget } from './url';

/** NODE_DEBUG=charging-fleet: each durable write a primary acknowledged that did not stand (sentinel.ts), and each change of server. */
const trace = debuglog('charging-fleet');

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

export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;
/** Pause between reconnection attempts: 100 ms, doubling, at most this. */
export const MAX_RECONNECT_PAUSE_MS = 2_000;
/** How long a durable write waits for its replicas' acknowledgement before the sentinels are asked instead. */
export const WAIT_REPLICAS_MS = 200;

export class FleetConnection {
  readonly target: RedisTarget;
  /** Redis's health as this replica sees it: listeners, and how long it has been down */
  readonly healthState: Health;
  private readonly redis: Redis;
  private readonly redactor = new Redactor();
  private everUp = false;
  private closed = false;
  private firstReady: Promise<void> | null = null;
  private lastError: ChargingError | null = null;
  private readonly connectTimeoutMs: number;
  /** null for one server */
  readonly sentinels: Sentinels | null;
  /** the primary the sentinels named at the last connection, and the healthy replicas a durable write waits for */
  private found: PrimaryFound | null = null;
  /** +switch-master heard before the sentinels named `found` (Sentinels.switches) */
  private foundAfter = 0;
  private serverId: string | null = null;
  private readonly serverListeners = new Set<() => void>();
  /** durable writes a primary acknowledged that were not taken as done (it was being replaced) */
  unconfirmedWrites = 0;

  constructor(options: FleetConnectionOptions) {
    this.target = parseRedisUrl(options.url);
    this.redactor.add(this.target.password);
    if (this.target.kind === 'sentinel') this.redactor.add(this.target.sentinelPassword);
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.healthState = new Health(this.target.where);
    const commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.sentinels = this.target.kind === 'sentinel' ? new Sentinels(this.target, { tls: options.tls, timeoutMs: Math.min(commandTimeoutMs, this.connectTimeoutMs), redact: (t) => this.redact(t), prefix: this.prefix(), now: monotonicNow }) : null;
    this.redis = new Redis(this.redisOptions(options));
    this.listen();
  }

  /** The primary the sentinels named at the last connection (null for one server, or before it). */
  get primary(): PrimaryFound | null {
    return this.found;
  }

  /** Tells the listener whenever the connection reaches another server than before (a failover, a restart): it may lack the last writes. */
  onServerChange(listener: () => void): () => void {
    this.serverListeners.add(listener);
    return () => this.serverListeners.delete(listener);
  }

  /** Where Redis is, without credentials: for messages and the status. */
  get where(): string {
    return this.target.where;
  }

  get health(): FleetHealth {
    return this.healthState.current;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Tells the listener about every change of health from now on; returns the way to stop. */
  onHealth(listener: HealthListener): () => void {
    return this.healthState.listen(listener);
  }

  /**
   * Connects (the constructor does not), and resolves once Redis answered, or
   * rejects with the reason within connectTimeoutMs. Reconnection goes on in
   * the background until close().
   */
  open(): Promise<void> {
    if (this.closed) return Promise.reject(this.closedError());
    // Watched from before the first connection: a failover while it is made must not leave it on the old primary.
    this.sentinels?.watch((to) => this.moveToNewPrimary(to));
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
      // A write a primary being replaced acknowledged is not an outage: Redis answers, the retry goes to the new primary.
      if ((error.code === 'NETWORK' || error.code === 'TIMEOUT') && error.causeCode !== 'UNCONFIRMED') this.markDown(error.message);
      throw error;
    }
  }

  /**
   * Runs a script by its SHA1; sends its text once when Redis answers
   * NOSCRIPT. A durable script on Sentinel counts only once confirmed
   * (confirmed()); otherwise it fails as NETWORK, and the caller's retry
   * (same claim, same commit id) reaches the new primary.
   */
  eval(call: ScriptCall): Promise<unknown> {
    const { script, keys, args } = call;
    if (script.durable && this.sentinels) return this.run(script.name, (redis) => this.durable(redis, call));
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

  /** Any failure from ioredis or Redis as a ChargingError (errors.ts). */
  toError(err: unknown, what: string): ChargingError {
    return redisError(err, what, { prefix: this.prefix(), tls: this.target.tls, redact: (t) => this.redact(t), sentinel: this.target.kind === 'sentinel' });
  }

  /** The script and WAIT in one round trip; then, unless every healthy replica acknowledged it, the sentinels decide. */
  private async durable(redis: Redis, call: ScriptCall): Promise<unknown> {
    const { script, keys, args } = call;
    const found = this.found;
    const waitFor = found?.replicas ?? 0;
    const send = async (full: boolean): Promise<[unknown, number]> => {
      const p = redis.pipeline();
      if (full) p.eval(script.lua, keys.length, ...keys, ...args);
      else p.evalsha(script.sha, keys.length, ...keys, ...args);
      if (waitFor > 0) p.wait(waitFor, WAIT_REPLICAS_MS);
      const [[err, value], acks] = (await p.exec()) ?? [[new Error('Connection is closed.'), null]];
      if (err) throw err;
      return [value, acks && !acks[0] ? Number(acks[1]) : 0];
    };
    let answer: [unknown, number];
    try {
      answer = await send(false);
    } catch (err) {
      if (!/NOSCRIPT/.test((err as Error)?.message ?? '')) throw err;
      answer = await send(true);
    }
    if (!found || (waitFor > 0 && answer[1] >= waitFor)) return answer[0];
    return this.confirmed(found, answer[0], script.name);
  }

  /** Fewer replicas than the healthy ones acknowledged: the write stands only while the sentinels keep this primary, with no failover under way. */
  private async confirmed(found: PrimaryFound, value: unknown, what: string): Promise<unknown> {
    const check = await (this.sentinels as Sentinels).stillPrimary(found.primary);
    if (this.found === found) found.replicas = check.replicas;
    if (check.ok) return value;
    this.unconfirmedWrites++;
    if (trace.enabled) trace('%d %s: %s acknowledged by %s:%d and not taken as done (%s)', Date.now(), this.target.where, what, found.primary.host, found.primary.port, check.why);
    // To the primary the sentinels name now: the caller's retry goes there.
    if (this.found === found) this.dropLiveConnection();
    throw new ChargingError('NETWORK', `${this.prefix()}: ${what}: acknowledged by ${found.primary.host}:${found.primary.port}, which is being replaced (${check.why}); not taken as done`, { cause: 'UNCONFIRMED', retryable: true });
  }

  /** Stops reconnecting, drops the connection; nothing is sent after this resolves. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.sentinels?.close();
    this.healthState.clear();
    // disconnect(), not quit(): quit() would queue behind commands waiting for a frozen Redis.
    this.redis.disconnect(false);
  }

  private redisOptions(options: FleetConnectionOptions): RedisOptions {
    const t = this.target;
    const where =
      t.kind === 'server'
        ? { host: t.host, port: t.port, tls: t.tls ? { servername: isIp(t.host) ? undefined : t.host, ...(options.tls ?? {}) } : undefined }
        : {
            // The primary the sentinels agree on, at every connection (sentinel.ts); `tls` here only says the stream is TLS.
            Connector: primaryConnector(this.sentinels as Sentinels, options.tls, (found, switchesBefore) => {
              this.found = found;
              this.foundAfter = switchesBefore;
            }),
            tls: t.tls ? (options.tls ?? {}) : undefined,
          };
    return {
      ...where,
      db: t.db,
      username: t.username,
      password: t.password,
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
      // A +switch-master heard while the connector asked and connected (dropLiveConnection cannot end a connection
      // being made): this one is to the primary being replaced, which keeps taking writes until it is demoted.
      // Each sentinel announces the same switch in turn: one naming the server connected to is no reason to leave it.
      const s = this.sentinels;
      if (s && s.switches !== this.foundAfter && !same(s.switchedTo, (this.found as PrimaryFound).primary)) {
        this.dropLiveConnection();
        return;
      }
      this.everUp = true;
      this.lastError = null;
      this.markUp();
      void this.identify();
    });
    // ioredis emits 'error' for connection failures: an EventEmitter without a listener would throw.
    this.redis.on('error', (err: unknown) => {
      if (this.closed) return;
      // On Sentinel, which server failed: the sentinels may name one this machine cannot reach (announce-ip, NAT).
      const f = this.found;
      this.lastError = this.toError(err, f ? `connect: the primary the sentinels name, ${f.primary.host}:${f.primary.port}` : 'connect');
      this.markDown(this.lastError.message);
    });
    this.redis.on('close', () => {
      if (this.closed) return;
      this.markDown(this.lastError?.message ?? `${this.prefix()}: the connection was lost`);
    });
    // ioredis ends a client whose connection attempt failed outright (its connector gave up): it is never left so.
    this.redis.on('end', () => {
      if (this.closed || !this.everUp) return;
      setTimeout(() => {
        if (!this.closed && this.redis.status === 'end') this.redis.connect().catch(() => undefined);
      }, MAX_RECONNECT_PAUSE_MS).unref?.();
    });
  }

  /** +switch-master: connected, drop the connection (the next one asks the sentinels); waiting to reconnect, reconnect now. */
  private moveToNewPrimary(to: Endpoint): void {
    if (this.closed) return;
    // The same switch announced by the next sentinel: the connection is on that primary already.
    if (this.redis.status === 'ready' && this.found && same(to, this.found.primary)) return;
    if (this.redis.status === 'reconnecting') this.redis.connect().catch(() => undefined);
    else this.dropLiveConnection();
  }

  /**
   * Drops a connection that has its stream (the next one asks the sentinels
   * again). Not while one is being made: the connector is asking the
   * sentinels already, and ending it then would end the client for good.
   */
  private dropLiveConnection(): void {
    if (!this.closed && (this.redis.status === 'ready' || this.redis.status === 'connect')) this.redis.disconnect(true);
  }

  /** Which server answers (its run id): another than before is told to the listeners. */
  private async identify(): Promise<void> {
    let id: string | undefined;
    try {
      id = /run_id:([0-9a-f]+)/.exec(await this.redis.info('server'))?.[1];
    } catch {
      return; // asked again at the next connection
    }
    if (!id || this.closed) return;
    const before = this.serverId;
    this.serverId = id;
    if (before === null || before === id) return;
    if (trace.enabled) trace('%d %s: another server answers (run id %s, was %s)', Date.now(), this.target.where, id.slice(0, 8), before.slice(0, 8));
    for (const l of [...this.serverListeners]) {
      try {
        l();
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private markUp(): void {
    if (this.closed || this.redis.status !== 'ready') return;
    this.healthState.up();
  }

  private markDown(reason: string): void {
    if (!this.closed) this.healthState.down(reason);
  }

  private prefix(): string {
    return `Coordinate replicas (Redis at ${this.target.where})`;
  }

  private closedError(): ChargingError {
    return new ChargingError('CLOSED', `${this.prefix()}: the coordination was closed (redeploy or shutdown)`);
  }
}
