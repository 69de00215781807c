/**
 * Leases: which process acts on which item of a list (a watched token, a
 * controlled connector), the item's state committed exactly once before its
 * effect goes out, and messages for whoever holds an item (docs/fleet.md,
 * "Leases and hand-over"). A scope is one list: a watch node's tokens, a
 * control node's targets; it has the same name on every replica.
 *
 * Alone (LocalLeases) every item on the list is held here for as long as it
 * is on it; a commit is kept nowhere but answered at once, and a message is
 * handed to this process at once. With Redis (nodes/lib/fleet/leases/) each
 * item is held by one live replica through a lease that can lapse under the
 * caller (`lapses`): every outside effect asks `holds` again right before it
 * goes, and a change is committed before it is told. Redis away: leases lapse,
 * commits answer `unavailable`, and nothing is held until Redis is back.
 */
import { ChargingError } from '../errors';

/** An item's committed state: its revision (grows only), and the state (null: none). */
export interface SavedEntry<S> {
  rev: number;
  state: S | null;
}

export interface AcquiredItem<S> {
  item: string;
  /** what the scope holds for it; null when it holds nothing (never committed, or Redis lost its data) */
  saved: SavedEntry<S> | null;
}

/** 'restored': released and acquired again in the same change, from a newer state put back after Redis lost its data */
export type ReleaseReason = 'rebalanced' | 'unwatched' | 'lease-lost' | 'closed' | 'restored';

export interface ReleasedItem {
  item: string;
  reason: ReleaseReason;
  /** e.g. "lease lost at 2026-11-25T10:00:00.000Z (Redis unreachable)" */
  message: string;
}

export interface LeaseChange<S> {
  /** items this process acts on from now on, with the state to resume from */
  acquired: AcquiredItem<S>[];
  /** items this process must stop acting on (already stopped: holds says false) */
  released: ReleasedItem[];
}

export type CommitResult = { ok: true; rev: number } | { ok: false; reason: 'not-owner' | 'stale' | 'unavailable'; message: string };

/** A message posted for an item's holder: the newest wins; `seq` grows with each post to the scope. */
export interface Posted {
  seq: number;
  text: string;
}

export interface LeaseScopeOptions<S> {
  /** told synchronously about items gained and lost; a listener that throws is reported to onError */
  onChange?: (change: LeaseChange<S>) => void;
  onError?: (err: ChargingError) => void;
  /** the name of the scope's messages (post/newest): a scope without one posts nothing */
  inbox?: string;
  /** the newest message of each item held here, after each cycle (with Redis) */
  onMessages?: (newest: Map<string, Posted>) => void;
}

export interface LeaseScope<S> {
  /**
   * Whether a held item can be lost at any moment (to another replica, to a
   * lapsed lease): then fence every outside effect with `holds` and commit a
   * change before telling it. False alone: held means held until removed.
   */
  readonly lapses: boolean;
  /** how long a holder that lost an item may still believe it holds it: its lease (alone: 0) */
  readonly leaseMs: number;
  /** whether the scope reaches its store now (Redis; alone: always) */
  readonly up: boolean;
  /** May this process act on the item now? Synchronous: ask it right before the effect. */
  holds(item: string): boolean;
  /** the items held here now */
  owned(): string[];
  /** the scope's whole list, this process's or not */
  items(): string[];
  /** adds items to the list (idempotent: every replica may add the same ones) */
  add(items: Iterable<string>): Promise<void>;
  /** removes items from the list, and their states */
  remove(items: Iterable<string>): Promise<void>;
  /** keeps an item's new state, exactly once, only while no other process holds it; never throws */
  commit(item: string, state: S | null): Promise<CommitResult>;
  /**
   * posts a message for the item's holder (this process or another): its
   * number, or null when a newer post of the same item replaced it before it
   * was kept; throws when it cannot be kept
   */
  post(item: string, text: string): Promise<number | null>;
  /** the newest message of each item (null: none); a failure reads as none */
  newest(items: string[]): Promise<Map<string, Posted | null>>;
  /** told at each change of whether the scope can reach its store (Redis); alone never; returns the way to stop */
  onHealth(listener: (up: boolean) => void): () => void;
  /** gives every item back so that others take over at once; `forget`: the list and messages leave too */
  close(forget?: boolean): Promise<void>;
}

export interface Leases {
  /** whether its scopes can lose an item under the caller (LeaseScope.lapses) */
  readonly lapses: boolean;
  /** the scope of this name (one per name and process) */
  open<S>(scope: string, options?: LeaseScopeOptions<S>): LeaseScope<S>;
}

/**
 * A process alone: every item on the list is held here until it is removed,
 * a commit is answered at once (the node keeps its state where it keeps it),
 * a message is handed over at once.
 */
export class LocalLeaseScope<S> implements LeaseScope<S> {
  readonly lapses = false;
  readonly leaseMs = 0;
  readonly up = true;
  private readonly list = new Set<string>();
  private readonly messages = new Map<string, Posted>();
  private seq = 0;
  private closed = false;

  constructor(private readonly options: LeaseScopeOptions<S> = {}) {}

  holds(item: string): boolean {
    return !this.closed && this.list.has(item);
  }

  owned(): string[] {
    return this.closed ? [] : [...this.list];
  }

  items(): string[] {
    return [...this.list];
  }

  add(items: Iterable<string>): Promise<void> {
    const fresh = [...items].filter((i) => !this.list.has(i));
    for (const i of fresh) this.list.add(i);
    if (fresh.length > 0 && !this.closed) this.tell({ acquired: fresh.map((item) => ({ item, saved: null })), released: [] });
    return Promise.resolve();
  }

  remove(items: Iterable<string>): Promise<void> {
    const gone = [...items].filter((i) => this.list.delete(i));
    for (const i of gone) this.messages.delete(i);
    if (gone.length > 0 && !this.closed) this.tell({ acquired: [], released: gone.map((item) => ({ item, reason: 'unwatched' as const, message: 'it is no longer on the list' })) });
    return Promise.resolve();
  }

  commit(item: string): Promise<CommitResult> {
    if (!this.holds(item)) return Promise.resolve({ ok: false, reason: 'not-owner', message: `${item} is not on the list` });
    return Promise.resolve({ ok: true, rev: ++this.seq });
  }

  post(item: string, text: string): Promise<number> {
    const posted = { seq: ++this.seq, text };
    this.messages.set(item, posted);
    if (this.holds(item)) this.options.onMessages?.(new Map([[item, posted]]));
    return Promise.resolve(posted.seq);
  }

  newest(items: string[]): Promise<Map<string, Posted | null>> {
    return Promise.resolve(new Map(items.map((i) => [i, this.messages.get(i) ?? null])));
  }

  onHealth(): () => void {
    return () => undefined;
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private tell(change: LeaseChange<S>): void {
    try {
      this.options.onChange?.(change);
    } catch (err) {
      this.options.onError?.(new ChargingError('INTERNAL', `A lease change could not be taken: ${(err as Error)?.message ?? String(err)}`));
    }
  }
}

/** Leases of a process alone: LocalLeaseScope per name. */
export const localLeases: Leases = {
  lapses: false,
  open: <S>(_scope: string, options?: LeaseScopeOptions<S>) => new LocalLeaseScope<S>(options),
};
