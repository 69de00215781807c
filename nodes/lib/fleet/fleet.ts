/**
 * The coordination of one fleet of replicas through Redis (docs/fleet.md):
 * what a configuration node opens when *Coordinate replicas* is set, and
 * closes with it. One connection, one replica id, one loop (every cycleMs:
 * the replica's heartbeat, then each watch scope's membership and leases),
 * and the pieces the client and the nodes plug in:
 *
 * - tokens: SharedTokenStore, a source for TokenCache
 * - budget(limit): SharedRequestBudget, in front of RequestBudget
 * - commands: CommandDedup, around START and STOP
 * - ownership(scope): WatchOwnership, for a watch node's schedule
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
import { FailureReporter, FleetConnection, MAX_RECONNECT_PAUSE_MS, type FleetConnectionOptions, type FleetHealth, type HealthListener } from './connection';
import { FleetKeys } from './keys';
import { HEARTBEAT } from './scripts';
import { parseReplicaInfo, type ReplicaInfo } from './replica-info';

export type { ReplicaInfo };
import { SharedTokenStore, type SharedTokenOptions } from './token-store';
import { SharedRequestBudget } from './budget';
import { CommandDedup, type DedupOptions } from './dedup';
import { WatchOwnership } from './ownership';
import type { OwnershipOptions } from './ownership-types';

export interface FleetOptions extends FleetConnectionOptions {
  /** from fleetKeyFor(): replicas with the same key coordinate */
  fleetKey: string;
  /** unique per process (default: host name, pid and random digits); never reuse one across processes */
  replicaId?: string;
  /** period of the heartbeat and lease renewal (default 2 s) */
  cycleMs?: number;
  /** lease time of a watched token and of a replica's membership (default 3 cycles) */
  leaseMs?: number;
  token?: SharedTokenOptions;
  dedup?: DedupOptions;
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
  readonly commands: CommandDedup;
  private readonly scopes = new Map<string, WatchOwnership<unknown>>();
  private readonly startedAt = Date.now();
  private live: ReplicaInfo[] = [];
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closing: Promise<void> | null = null;
  private readonly failures: FailureReporter;
  /** the last heartbeat's round trip to Redis, ms (monotonic); null until one succeeds, and after one fails (metrics) */
  private heartbeatMs: number | null = null;

  constructor(private readonly options: FleetOptions) {
    this.keys = new FleetKeys(options.fleetKey);
    this.replicaId = options.replicaId ?? newReplicaId();
    this.cycleMs = options.cycleMs ?? DEFAULT_CYCLE_MS;
    this.leaseMs = options.leaseMs ?? 3 * this.cycleMs;
    if (!(this.leaseMs >= 2 * this.cycleMs)) throw new ChargingError('CONFIG', `Coordinate replicas: the lease time (${this.leaseMs} ms) must be at least two cycles (${2 * this.cycleMs} ms)`);
    this.connection = new FleetConnection({ ...options, name: options.name ?? `chargectl-${this.replicaId}`.replace(/[^\x21-\x7e]/g, '_') });
    this.failures = new FailureReporter(this.connection, options.onError);
    const ctx = { connection: this.connection, keys: this.keys, replicaId: this.replicaId, onWarning: options.onWarning };
    this.tokens = new SharedTokenStore(ctx, options.token);
    // A live claimer is back among the members within a lease, and after Redis lost its data within a reconnection and two cycles.
    this.commands = new CommandDedup({ ...ctx, takeOverAfterMs: Math.max(this.leaseMs, MAX_RECONNECT_PAUSE_MS + 2 * this.cycleMs) }, options.dedup);
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

  /** The ownership of a watch scope (a watch node; its id is the same on every replica). One per scope. */
  ownership<S>(scope: string, options: OwnershipOptions<S> = {}): WatchOwnership<S> {
    if (this.closing) throw new ChargingError('CLOSED', 'The coordination was closed');
    if (this.scopes.has(scope)) throw new ChargingError('INTERNAL', `Watch scope ${scope} is open already`);
    const own = new WatchOwnership<S>(scope, { connection: this.connection, replicaId: this.replicaId, leaseMs: this.leaseMs, cycleMs: this.cycleMs, kick: () => this.kick() }, this.keys.scope(scope), options);
    this.scopes.set(scope, own as WatchOwnership<unknown>);
    this.kick();
    return own;
  }

  /** Closes one scope: its leases are given back at once, so the others take over at their next cycle. */
  async closeOwnership(scope: string): Promise<void> {
    const own = this.scopes.get(scope);
    if (!own) return;
    this.scopes.delete(scope);
    await own.close();
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

  /** Runs a cycle soon (a change of a watch list), rather than at the next period. */
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

  private async shutdown(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
    const scopes = [...this.scopes.values()];
    this.scopes.clear();
    for (const s of scopes) await s.close();
    await this.connection.eval(HEARTBEAT, [this.keys.replicas, this.keys.replicaInfo], [this.replicaId, this.leaseMs, '', '1']).catch(() => undefined);
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
    for (const s of [...this.scopes.values()]) {
      if (this.closing) return;
      await s.cycle();
    }
  }

  private async heartbeat(): Promise<void> {
    let owned = 0;
    for (const s of this.scopes.values()) owned += s.owned().length;
    const info = JSON.stringify({ host: os.hostname(), pid: process.pid, startedAt: this.startedAt, owned });
    const res = (await this.connection.eval(HEARTBEAT, [this.keys.replicas, this.keys.replicaInfo], [this.replicaId, this.leaseMs, info, '0'])) as unknown[];
    const live: ReplicaInfo[] = [];
    for (let i = 4; i + 1 < res.length; i += 2) live.push({ ...parseReplicaInfo(res[i + 1]), id: String(res[i]) });
    if (!this.closing) this.live = live;
  }
}
