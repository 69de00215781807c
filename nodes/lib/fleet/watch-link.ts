/**
 * A watch node's list with *Coordinate replicas* (docs/fleet.md "The watcher
 * protocol"): the list is the fleet's (in Redis), each token is polled by the
 * one replica that holds its lease, and a poll's change is committed to the
 * fleet before its events go out, so that a replica taking a token over emits
 * nothing that was already emitted and loses no `ended`. The watcher's
 * schedule asks mayPoll and commit (WatcherOptions); this link turns the
 * ownership's gains and losses into watch and unwatch.
 */
import type { WatchShare, WatchShareOptions } from '../coordination/coordination';
import type { SavedState, SessionWatcher, WatcherOptions } from '../session/watcher';
import type { Fleet } from './fleet';
import type { WatchOwnership } from './ownership';
import { StandDown } from './stand-down';

/** Poll failures that say this replica cannot reach the service (not the service's word on one token). */
const UNREACHABLE = new Set(['NETWORK', 'TIMEOUT', 'AUTH']);

export class FleetWatchLink implements WatchShare {
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
    private readonly options: WatchShareOptions,
    /** told at each stand-down (the metrics count them) */
    onStandDown: () => void = () => undefined,
  ) {
    const { voice } = options;
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
      onError: (err) => voice.warnOnce('fleet', `Coordinate replicas: ${err.message}`),
    });
    this.standDown = new StandDown(this.own, fleet.replicaId, () => options.probe(this.own.watched()[0] ?? ''), {
      onChange: (down, err) => {
        if (down) onStandDown();
        if (down) voice.warnOnce('fleet-stand-down', `Coordinate replicas: this replica cannot reach the service (${err?.message ?? ''}); its watched tokens go to the other replicas until it can`);
        else voice.warnOnce('fleet-stand-down', 'Coordinate replicas: the service answers again; this replica takes its share of the watched tokens back');
      },
    });
    this.offHealth = fleet.onHealth((h) => {
      if (!h.up) options.show({ up: false, count: this.watcher?.size ?? 0 });
      else this.showCount();
    });
  }

  watcherOptions(): Pick<WatcherOptions, 'mayPoll' | 'commit' | 'onPolled'> {
    return {
      mayPoll: (token) => this.own.mayPoll(token),
      commit: (token, state) => this.own.commit(token, state).then((r) => r.ok),
      onPolled: (_token, err) => this.standDown.polled(err && UNREACHABLE.has(err.code) ? err : null),
    };
  }

  attach(watcher: SessionWatcher, onShare: () => void): void {
    this.watcher = watcher;
    this.onShare = onShare;
  }

  /** The fleet's list and states decide; the local ones only seed a token Redis holds nothing for. */
  resume(tokens: string[], kept: (token: string) => SavedState | undefined): void {
    this.local = kept;
    this.watch(tokens);
  }

  /** Adds tokens to the fleet's list: the replica that owns each polls it (maybe this one, from its next cycle). */
  watch(tokens: string[]): void {
    this.own.watch(tokens).catch((err: unknown) => this.options.voice.report(err));
  }

  unwatch(tokens: string[]): void {
    this.watcher?.unwatch(tokens);
    this.own.unwatch(tokens).catch((err: unknown) => this.options.voice.report(err));
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
    if (this.fleet.health.up) this.options.show({ up: true, count: this.watcher?.size ?? 0, total: this.total });
  }
}
