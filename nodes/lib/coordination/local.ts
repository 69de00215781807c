/**
 * A process alone (no *Coordinate replicas*): every command goes out at once,
 * every watched token and control target is this process's, and state is kept
 * where the node keeps it. Nothing here waits, and nothing is loaded for it.
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { ControlBook } from '../control/book';
import type { ControlDeps } from '../control/controller';
import type { WishOptions } from '../control/reconcile';
import type { ControlTarget } from '../control/view';
import type { ChargingError } from '../errors';
import type { ChargingCommand } from '../session/commands';
import type { SavedState, SessionWatcher, WatcherOptions } from '../session/watcher';
import { localClaims } from './claims';
import { LocalGrantPool } from './grant-pool';
import type { GrantPool, GrantStore } from './grants';
import type { CommandRun, CommandShare, ControlShare, Coordination, LocalControlStore, ShareVoice, WatchShare, WatchShareOptions } from './coordination';

const sendNow: CommandShare = {
  async run<T>(_command: ChargingCommand, send: () => Promise<T>): Promise<CommandRun<T>> {
    return { role: 'sent', deduplicated: false, result: await send() };
  },
};

export class LocalCoordination implements Coordination {
  readonly commands = sendNow;
  readonly claims = localClaims;

  clientHooks(): FleetHooks | undefined {
    return undefined;
  }

  watch(_scope: string, _options: WatchShareOptions): WatchShare {
    return new LocalWatchShare();
  }

  control(_scope: string, _voice: ShareVoice, local: LocalControlStore): ControlShare {
    return new LocalControlShare(local);
  }

  private readonly pools = new Map<string, LocalGrantPool>();

  grants(pool: string, local: GrantStore): GrantPool {
    let p = this.pools.get(pool);
    if (!p) this.pools.set(pool, (p = new LocalGrantPool({ store: local })));
    return p;
  }
}

/** The watcher's own list: the node's tokens, all polled here. */
class LocalWatchShare implements WatchShare {
  private watcher: SessionWatcher | null = null;

  watcherOptions(): Pick<WatcherOptions, 'mayPoll' | 'commit' | 'onPolled'> {
    return {};
  }

  attach(watcher: SessionWatcher): void {
    this.watcher = watcher;
  }

  resume(tokens: string[], kept: (token: string) => SavedState | undefined): void {
    this.watcher?.watch(tokens, kept);
  }

  watch(tokens: string[]): void {
    this.watcher?.watch(tokens);
  }

  unwatch(tokens: string[]): void {
    this.watcher?.unwatch(tokens);
  }

  unwatchAll(): void {
    this.watcher?.unwatchAll();
  }

  get total(): number {
    return this.watcher?.size ?? 0;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Every target commanded here, its memory in the node's context, a wish checked at once. */
class LocalControlShare implements ControlShare {
  private book: ControlBook | null = null;

  constructor(private readonly local: LocalControlStore) {}

  deps(): Pick<ControlDeps, 'store'> {
    return { store: this.local };
  }

  attach(book: ControlBook): void {
    this.book = book;
  }

  want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<ChargingError | undefined> {
    return this.book ? this.book.want(target, wanted, opts) : Promise.resolve(undefined);
  }

  /** A removed node's targets go with it; a redeployed one keeps them for its successor. */
  close(removed: boolean): Promise<void> {
    if (removed) void this.local.clear().catch(() => undefined);
    return Promise.resolve();
  }
}
