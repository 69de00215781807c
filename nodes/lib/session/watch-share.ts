/**
 * A watch node's list on the seam's leases (docs/fleet.md, "The watcher
 * protocol"): which tokens this process polls, and where a poll's change is
 * committed. The scope's gains and losses become the watcher's watch and
 * unwatch, seeded from the state the scope kept (or, where it kept none, the
 * state the node kept in its context).
 *
 * Alone every token on the list is polled here, with no fence and no commit
 * (nothing can take a token away). With replicas each token is polled by the
 * one replica that holds its lease, the lease is asked again before each poll
 * goes on the wire, and a change is committed before its events go out, so
 * that a replica taking a token over emits nothing that was already emitted
 * and loses no `ended`.
 */
import type { ShareVoice } from '../coordination/coordination';
import type { LeaseChange, LeaseScope, Leases } from '../coordination/leases';
import type { SavedState, SessionWatcher, WatcherOptions } from './watcher';

/** What a watch node shows of the fleet: its share and the whole list, or that Redis is away. */
export type WatchView = { up: true; count: number; total: number } | { up: false; count: number };

export interface WatchShareOptions {
  voice: ShareVoice;
  /** the badge: called when the share or Redis's health changes (alone: never) */
  show(view: WatchView): void;
}

export class WatchShare {
  private readonly scope: LeaseScope<SavedState>;
  private watcher: SessionWatcher | null = null;
  /** states kept by the node (its context store): a seed only where the scope keeps none */
  private local: (token: string) => SavedState | undefined = () => undefined;
  /** after every gain or loss: the node tells the request budget its poll demand again */
  private onShare: () => void = () => undefined;
  private readonly offHealth: () => void;

  constructor(
    leases: Leases,
    name: string,
    private readonly options: WatchShareOptions,
  ) {
    this.scope = leases.open<SavedState>(name, {
      onChange: (change) => this.changed(change),
      onError: (err) => options.voice.warnOnce('fleet', `Coordinate replicas: ${err.message}`),
    });
    this.offHealth = this.scope.onHealth((up) => {
      if (!up) options.show({ up: false, count: this.watcher?.size ?? 0 });
      else this.showCount();
    });
  }

  /** What the watcher asks before each poll and after each change: nothing alone (no fence, no commit). */
  watcherOptions(): Pick<WatcherOptions, 'mayPoll' | 'commit'> {
    if (!this.scope.lapses) return {};
    return {
      mayPoll: (token) => this.scope.holds(token),
      commit: (token, state) => this.scope.commit(token, state).then((r) => r.ok),
    };
  }

  /** The watcher that polls this process's share; `onShare` after every gain or loss. */
  attach(watcher: SessionWatcher, onShare: () => void): void {
    this.watcher = watcher;
    this.onShare = onShare;
  }

  /** The node's tokens after a (re)start, with the states kept in context: seeds where the scope keeps none. */
  resume(tokens: string[], kept: (token: string) => SavedState | undefined): void {
    this.local = kept;
    this.watch(tokens);
  }

  /** Adds tokens to the list: the process that holds each polls it (maybe this one, at once alone or from its next cycle). */
  watch(tokens: string[]): void {
    this.scope.add(tokens).catch((err: unknown) => this.options.voice.report(err));
  }

  unwatch(tokens: string[]): void {
    this.watcher?.unwatch(tokens);
    this.scope.remove(tokens).catch((err: unknown) => this.options.voice.report(err));
  }

  unwatchAll(): void {
    this.unwatch(this.scope.items());
  }

  /** Every token on the list, this process's or not: the poll demand the budget is sized for. */
  get total(): number {
    return this.scope.items().length;
  }

  /** On close: leases given back at once (the others take over at their next cycle); a removed node's list leaves with it. */
  async close(removed: boolean): Promise<void> {
    this.offHealth();
    await this.scope.close(removed);
  }

  private changed(change: LeaseChange<SavedState>): void {
    const w = this.watcher;
    if (!w) return;
    if (change.released.length > 0) w.unwatch(change.released.map((r) => r.item));
    if (change.acquired.length > 0) {
      const saved = new Map(change.acquired.map((a) => [a.item, a.saved]));
      w.watch(saved.keys(), (t) => {
        const s = saved.get(t);
        return s ? (s.state ?? undefined) : this.local(t);
      });
    }
    this.showCount();
    this.onShare();
  }

  /** The fleet's share on the badge; alone the node's own badge says it all. */
  private showCount(): void {
    if (this.scope.lapses && this.scope.up) this.options.show({ up: true, count: this.watcher?.size ?? 0, total: this.total });
  }
}
