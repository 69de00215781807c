/**
 * Watch mode with *Coordinate replicas* (docs/fleet.md "The watcher
 * protocol"): the watch list is the fleet's (in Redis), each token is
 * polled by the one replica that holds its lease, and a poll's change is
 * committed to the fleet before its events go out, so that a replica taking
 * a token over emits nothing that was already emitted and loses no `ended`.
 * The watcher's schedule asks mayPoll and commit (WatcherOptions); this link
 * turns the ownership's gains and losses into watch and unwatch.
 */
import type { Fleet } from '../lib/fleet/fleet';
import type { WatchOwnership } from '../lib/fleet/ownership';
import type { SavedState, SessionWatcher, WatcherOptions } from '../lib/session/watcher';
import type { NodeLifecycle } from './run-node';
import { StandDown } from '../lib/fleet/stand-down';
import { Status } from './status';

/** Poll failures that say this replica cannot reach the service (not the service's word on one token). */
const UNREACHABLE = new Set(['NETWORK', 'TIMEOUT', 'AUTH']);

export class FleetWatchLink {
  private readonly own: WatchOwnership<SavedState>;
  private watcher: SessionWatcher | null = null;
  /** states kept locally (the context store): a seed only when Redis holds nothing for a token (it lost its data) */
  private local: (token: string) => SavedState | undefined = () => undefined;
  /** after every gain or loss: the node tells the request budget its poll demand again */
  private onShare: () => void = () => undefined;
  private readonly offHealth: () => void;

  /** gives this replica's share away while it cannot reach the service */
  private readonly standDown: StandDown;

  constructor(
    private readonly fleet: Fleet,
    private readonly scope: string,
    private readonly life: NodeLifecycle,
    /** one progress query of the given token: the probe of a replica that stood down */
    probe: (token: string) => Promise<unknown>,
  ) {
    this.own = fleet.ownership<SavedState>(scope, {
      onChange: (change) => {
        const w = this.watcher;
        if (!w) return;
        if (change.released.length > 0) w.unwatch(change.released.map((r) => r.token));
        if (change.acquired.length > 0) {
          const saved = new Map(change.acquired.map((a) => [a.token, a.saved]));
          w.watch(saved.keys(), (t) => {
            const s = saved.get(t);
            return s ? (s.state ?? undefined) : this.local(t);
          });
        }
        this.showCount();
        this.onShare();
      },
      onError: (err) => life.warnOnce('fleet', `Coordinate replicas: ${err.message}`),
    });
    this.standDown = new StandDown(this.own, fleet.replicaId, () => probe(this.own.watched()[0] ?? ''), {
      onChange: (down, err) => {
        if (down) life.warnOnce('fleet-stand-down', `Coordinate replicas: this replica cannot reach the service (${err?.message ?? ''}); its watched tokens go to the other replicas until it can`);
        else life.warnOnce('fleet-stand-down', 'Coordinate replicas: the service answers again; this replica takes its share of the watched tokens back');
      },
    });
    this.offHealth = fleet.onHealth((h) => {
      if (!h.up) life.board.set(Status.warn('fleetDown', { count: this.watcher?.size ?? 0 }));
      else this.showCount();
    });
  }

  /** What the watcher asks before each poll and after each change. */
  watcherOptions(): Pick<WatcherOptions, 'mayPoll' | 'commit' | 'onPolled'> {
    return {
      mayPoll: (token) => this.own.mayPoll(token),
      commit: (token, state) => this.own.commit(token, state).then((r) => r.ok),
      onPolled: (_token, err) => this.standDown.polled(err && UNREACHABLE.has(err.code) ? err : null),
    };
  }

  /** The watcher that polls what this replica owns: told of every gain and loss from now on (and onShare after each). */
  attach(watcher: SessionWatcher, onShare: () => void): void {
    this.watcher = watcher;
    this.onShare = onShare;
  }

  /** The states kept locally, once the context store has loaded them. */
  seed(local: (token: string) => SavedState | undefined): void {
    this.local = local;
  }

  /** Adds tokens to the fleet's list: the replica that owns each polls it (maybe this one, from its next cycle). */
  watch(tokens: string[]): void {
    this.own.watch(tokens).catch((err: unknown) => this.life.report(err));
  }

  unwatch(tokens: string[]): void {
    this.watcher?.unwatch(tokens);
    this.own.unwatch(tokens).catch((err: unknown) => this.life.report(err));
  }

  unwatchAll(): void {
    this.unwatch(this.own.watched());
  }

  get total(): number {
    return this.own.watched().length;
  }

  /** On close: leases given back at once (the others take over at their next cycle); a removed node's list is dropped from the fleet. */
  async close(removed: boolean): Promise<void> {
    this.offHealth();
    this.standDown.close();
    if (removed) await this.own.unwatch(this.own.watched()).catch(() => undefined);
    await this.fleet.closeOwnership(this.scope);
  }

  private showCount(): void {
    if (this.fleet.health.up) this.life.board.set(Status.ok('watchingFleet', { count: this.watcher?.size ?? 0, total: this.total }));
  }
}
