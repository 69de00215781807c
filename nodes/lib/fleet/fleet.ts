/**
 * The coordination of one fleet of replicas through Redis (docs/fleet.md):
 * what a configuration node opens when *Coordinate replicas* is set, and
 * closes with it. One connection (redis/), one replica id, and one loop:
 * every cycleMs the replica's heartbeat (membership/), the comparison of its
 * answers from the service with its peers' (service-reach.ts), then each
 * hook registered with everyCycle (each lease scope's membership, leases and
 * messages). No other timer runs in the fleet.
 *
 * The pieces the client and the nodes plug in:
 * - tokens: SharedTokenStore, a source for TokenCache
 * - budget(limit): SharedRequestBudget, in front of RequestBudget
 * - claims: RedisClaims, work done once per key (START and STOP among them)
 * - leases: RedisLeaseScope per scope (a watch node's tokens, a control node's targets)
 * - reach: ServiceReach, stand-down by comparison
 *
 * Health (up/down, once per change) comes from the connection. Nothing in
 * here throws to a caller that did not ask for an answer, and nothing is
 * written to Redis once close() has resolved.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { ChargingError } from '../errors';
import { monotonicNow } from '../clock';
import type { FleetHooks } from '../client/fleet-hooks';
import type { LeaseScopeOptions, Leases } from '../coordination/leases';
import { FleetConnection, MAX_RECONNECT_PAUSE_MS, type FleetConnectionOptions } from './redis/connection';
import { FailureReporter, type FleetHealth, type HealthListener } from './redis/health';
import { FleetKeys } from './redis/keys';
import { Membership } from './membership/membership';
import type { ReplicaInfo } from './membership/replica-info';
import { ServiceReach, type ServiceReachOptions } from './membership/service-reach';
import { SharedTokenStore, type SharedTokenOptions } from './token/token-store';
import { SharedRequestBudget } from './budget/budget';
import { RedisClaims, type ClaimOptions } from './claims/claims';
import { RedisLeaseScope } from './leases/lease-scope';
import { RedisGrantPool } from './grants/redis-grant-pool';

export type { ReplicaInfo };

export interface FleetOptions extends FleetConnectionOptions {
  /** from fleetKeyFor(): replicas with the same key coordinate */
  fleetKey: string;
  /** unique per process (default: host name, pid and random digits); never reuse one across processes */
  replicaId?: string;
  /** period of the heartbeat and lease renewal (default 2 s) */
  cycleMs?: number;
  /** lease time of a held item and of a replica's membership (default 3 cycles) */
  leaseMs?: number;
  token?: SharedTokenOptions;
  claims?: ClaimOptions;
  /** stand-down by comparison with the peers (service-reach.ts) */
  reach?: Omit<ServiceReachOptions, 'now' | 'onChange'>;
  /** things a person should know that are not errors (a fallback taken) */
  onWarning?: (text: string) => void;
  /** failures of the background loop (also reflected in health) */
  onError?: (err: ChargingError) => void;
}

export const DEFAULT_CYCLE_MS = 2_000;

export function newReplicaId(): string {
  return `${os.hostname().slice(0, 40)}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

export class Fleet {
  readonly connection: FleetConnection;
  readonly keys: FleetKeys;
  readonly replicaId: string;
  readonly cycleMs: number;
  readonly leaseMs: number;
  readonly tokens: SharedTokenStore;
  readonly claims: RedisClaims;
  /** whether this replica reaches the service where its peers do; its share is given away while not */
  readonly reach: ServiceReach;
  readonly leases: Leases;
  private readonly scopes = new Map<string, RedisLeaseScope<unknown>>();
  private readonly pools = new Map<string, RedisGrantPool>();
  private readonly hooks = new Set<() => Promise<void>>();
  private readonly membership: Membership;
  private readonly startedAt = Date.now();
  private live: ReplicaInfo[] = [];
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closing: Promise<void> | null = null;
  private readonly failures: FailureReporter;
  /** the last heartbeat's round trip to Redis, ms (monotonic); null until one succeeds, and after one fails (metrics) */
  private heartbeatMs: number | null = null;
  /** Redis's time in the last heartbeat's answer, and this replica's monotonic ms when the answer came */
  private redisClock: { redisMs: number; answeredAt: number } | null = null;

  constructor(private readonly options: FleetOptions) {
    this.keys = new FleetKeys(options.fleetKey);
    this.replicaId = options.replicaId ?? newReplicaId();
    this.cycleMs = options.cycleMs ?? DEFAULT_CYCLE_MS;
    this.leaseMs = options.leaseMs ?? 3 * this.cycleMs;
    if (!(this.leaseMs >= 2 * this.cycleMs)) throw new ChargingError('CONFIG', `Coordinate replicas: the lease time (${this.leaseMs} ms) must be at least two cycles (${2 * this.cycleMs} ms)`);
    this.connection = new FleetConnection({ ...options, name: options.name ?? `chargectl-${this.replicaId}`.replace(/[^\x21-\x7e]/g, '_') });
    this.failures = new FailureReporter(this.connection, options.onError);
    this.membership = new Membership(this.connection, this.keys, this.replicaId, this.leaseMs);
    const ctx = { connection: this.connection, keys: this.keys, replicaId: this.replicaId, onWarning: options.onWarning };
    this.reach = new ServiceReach({
      // A probe at most every 2.5 cycles (5 s at the default cycle): each cycle reviews, and probes when one is due.
      probeMs: 2.5 * this.cycleMs,
      // A peer's answer is placed late by its event loop's lag and its heartbeat's way to Redis: at least two seconds, or a cycle.
      marginMs: Math.max(2_000, this.cycleMs),
      // A healthy peer seen this long (and at least two cycles) before standing down.
      confirmMs: Math.max(3_000, 2 * this.cycleMs),
      ...options.reach,
      now: monotonicNow,
      onChange: (down, why) => {
        for (const s of this.scopes.values()) s.standDown(down);
        options.onWarning?.(down ? `This replica gives its watched tokens and control targets to the others: ${why}; it probes the service and takes them back at the first answer` : `This replica takes its share of the watched tokens and control targets back: ${why}`);
      },
    });
    this.tokens = new SharedTokenStore(ctx, options.token);
    // A live claimer is back among the members within a lease, and after Redis lost its data within a reconnection and two cycles.
    this.claims = new RedisClaims({ ...ctx, takeOverAfterMs: Math.max(this.leaseMs, MAX_RECONNECT_PAUSE_MS + 2 * this.cycleMs), defer: () => this.reach.deferCommands, redisTimeAt: (t) => this.redisTimeAt(t) }, options.claims);
    this.leases = { lapses: true, open: (scope, opts) => this.scope(scope, opts) };
    // Another server (a failover, a restart) may lack the last writes: every scope puts back the states it knows.
    this.connection.onServerChange(() => {
      for (const s of this.scopes.values()) s.serverChanged();
    });
    // Connects in the background; the loop's first cycle waits for it (bounded) and retries every cycle.
    this.connection.open().catch(() => undefined);
    this.schedule(0);
  }

  get health(): FleetHealth {
    return this.connection.health;
  }

  onHealth(listener: HealthListener): () => void {
    return this.connection.onHealth(listener);
  }

  /** The fleet's request budget at this limit (requests per second for all replicas together). */
  budget(limit: number): SharedRequestBudget {
    return new SharedRequestBudget({ connection: this.connection, keys: this.keys, liveReplicas: () => this.live.length }, limit);
  }

  /**
   * What a ServiceClient takes from the fleet (its `fleet` option): the shared
   * token as the cache's source, a refused token forgotten in Redis too, and
   * the fleet's budget behind the local one.
   */
  clientHooks(): FleetHooks {
    return {
      fetchToken: (fetchLocal, identity) => this.tokens.fetch(fetchLocal, identity),
      invalidateToken: (value, identity) => void this.tokens.invalidate(value, identity),
      budget: (limit) => this.budget(limit),
    };
  }

  /** The live replicas at the last heartbeat, as they describe themselves. */
  replicas(): ReplicaInfo[] {
    return this.live.map((r) => ({ ...r }));
  }

  /**
   * Runs `hook` at every cycle, after the heartbeat (a hook's failure is its
   * own: it reports it). Returns the way to stop.
   */
  everyCycle(hook: () => Promise<void>): () => void {
    this.hooks.add(hook);
    return () => this.hooks.delete(hook);
  }


  /** Leases this replica holds now in these scopes (one not open holds none): read by the metrics. */
  leasesHeld(scopes: Iterable<string>): number {
    let n = 0;
    for (const scope of scopes) n += this.scopes.get(scope)?.owned().length ?? 0;
    return n;
  }

  /** The last heartbeat's round trip to Redis in ms, or null while none succeeded since the last failure (metrics). */
  get roundTripMs(): number | null {
    return this.heartbeatMs;
  }

  /**
   * Redis's time at least, at this replica's monotonic ms `t`: the heartbeat's
   * answer was read on Redis's clock before it came back here. After a
   * failover the next heartbeat reads the new primary's clock.
   */
  private redisTimeAt(t: number): number | null {
    return this.redisClock === null ? null : this.redisClock.redisMs + (t - this.redisClock.answeredAt);
  }

  /** Runs a cycle soon (a change of a list), rather than at the next period. */
  kick(): void {
    if (this.closing) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  /**
   * Stops the loop, gives every lease back, leaves the fleet and closes the
   * connection. Bounded: with Redis away, each step fails within the command
   * timeout. Nothing is written once this has resolved.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** The grant pool of this name (a depot), one per name: every replica's of the same name is the same pool in Redis. */
  grantPool(pool: string): RedisGrantPool {
    let p = this.pools.get(pool);
    if (!p) this.pools.set(pool, (p = new RedisGrantPool({ connection: this.connection, keys: this.keys.grants(pool), everyCycle: (hook) => this.everyCycle(hook) })));
    return p;
  }

  /** The open scope of this name, if any (its replicas and holdings, for Test connection and tests). */
  opened(scope: string): RedisLeaseScope<unknown> | undefined {
    return this.scopes.get(scope);
  }

  /** A lease scope of this name (one per name): its cycle runs in the fleet's loop until it closes. */
  scope<S>(scope: string, options: LeaseScopeOptions<S> = {}): RedisLeaseScope<S> {
    if (this.closing) throw new ChargingError('CLOSED', 'The coordination was closed');
    if (this.scopes.has(scope)) throw new ChargingError('INTERNAL', `Scope ${scope} is open already`);
    let stop: () => void = () => undefined;
    const ctx = {
      connection: this.connection,
      replicaId: this.replicaId,
      leaseMs: this.leaseMs,
      cycleMs: this.cycleMs,
      kick: () => this.kick(),
      forget: () => {
        stop();
        if (this.scopes.get(scope) === own) this.scopes.delete(scope);
      },
    };
    const own: RedisLeaseScope<S> = new RedisLeaseScope<S>(scope, ctx, this.keys.scope(scope, options.inbox), options);
    this.scopes.set(scope, own as RedisLeaseScope<unknown>);
    stop = this.everyCycle(() => own.cycle());
    own.standDown(this.reach.standingDown);
    this.kick();
    return own;
  }

  private async shutdown(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
    for (const s of [...this.scopes.values()]) await s.close();
    this.hooks.clear();
    await this.membership.leave().catch(() => undefined);
    await this.connection.close();
  }

  private schedule(ms: number): void {
    if (this.closing) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      // A cycle slower than the period: the next one follows it rather than overlapping it.
      if (this.running) return void (this.again = true);
      this.running = this.cycle().finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.schedule(0);
        }
      });
    }, ms);
    this.timer.unref?.();
  }

  private async cycle(): Promise<void> {
    this.schedule(this.cycleMs);
    const sent = monotonicNow();
    try {
      await this.heartbeat();
      this.heartbeatMs = monotonicNow() - sent;
      this.failures.succeeded();
    } catch (err) {
      this.heartbeatMs = null;
      if (!this.closing) this.failures.failed(err, 'heartbeat');
    }
    for (const hook of [...this.hooks]) {
      if (this.closing) return;
      await hook();
    }
  }

  private async heartbeat(): Promise<void> {
    let owned = 0;
    for (const s of this.scopes.values()) owned += s.owned().length;
    const sentAt = monotonicNow();
    const beat = await this.membership.beat({ host: os.hostname(), pid: process.pid, startedAt: this.startedAt, owned, reach: this.reach.published() });
    if (this.closing) return;
    this.live = beat.live;
    this.redisClock = { redisMs: beat.redisMs, answeredAt: monotonicNow() };
    this.reach.review(this.replicaId, beat.live, { redisMs: beat.redisMs, sentAt });
  }
}
