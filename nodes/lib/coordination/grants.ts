/**
 * Grants: a counting semaphore with a priority queue, shared by every node
 * (and, with replicas, every replica) that names the same pool: at most
 * `limit` entries granted, or `budgetKW` of their weights, at once. A grant
 * is held by a *key* (charging-control's target), not by a process: whoever
 * holds the key renews it, and it lapses only when its key has gone
 * unrenewed for its lapseMs while other keys of the pool were renewed (a
 * store that nobody could reach lapses nothing). Waiters expire when not
 * asked again within their waitMs. One clock: the pool's own (Redis's with
 * replicas), never the caller's. docs/depot.md, "The grants interface".
 *
 * Every operation is one atomic step on one key that answers with the
 * pool's table, so that a control check costs one round trip: ask (join the
 * queue, granted when in order and it fits), hold (count it: a session is
 * there, with or without a grant asked for), release (nothing of it counts),
 * look (renew, change nothing). The depot's rules (turns, aging as a rank,
 * shedding, idle release, the kW estimate) are the caller's: nodes/lib/depot.
 *
 * Unavailable (the store cannot be asked or cannot keep the change) is an
 * answer, not a throw: no grant is given without its record, and a caller
 * leaves running sessions alone.
 */
import { monotonicNow } from '../clock';

/** What an entry's holder says about it (the depot's words: station, state, kW source); opaque to the pool. */
export type GrantNote = Record<string, string | number | boolean | null>;

export interface GrantEntry {
  key: string;
  /** granted: counts against the limit; waiting: in the queue */
  state: 'granted' | 'waiting';
  priority: number;
  /** what it counts, kW (waiting: what it will count once granted) */
  weight: number;
  /** when it joined the queue (pool clock, ms) */
  askedAt: number;
  /** when it was granted or first counted (waiting: askedAt) */
  since: number;
  /** when its holder last asked, held or looked */
  renewedAt: number;
  note: GrantNote;
}

/** The pool's rules, set at deploy by its configuration (and its limit at run time). */
export interface PoolRules {
  /** most entries granted at once (null: no count limit) */
  limit: number | null;
  /** most kW of weights granted at once (null: none) */
  budgetKW: number | null;
  /** waiting this long is worth one priority level (0: strict priority): the queue's order is askedAt − priority × agingMs */
  agingMs: number;
}

/** The pool as one answer shows it. */
export interface GrantTable {
  /** the pool's clock when it answered */
  now: number;
  limit: number | null;
  budgetKW: number | null;
  agingMs: number;
  /** entries granted, and the sum of their weights */
  inUse: number;
  usedKW: number;
  /** entries waiting */
  waiting: number;
  /** since when the pool has been over its limit with no grant freed (null: not over) */
  overSince: number | null;
  /** every granted entry, the longest held first */
  holders: readonly GrantEntry[];
  /** the first waiters, in queue order (at most HEAD_SIZE) */
  head: readonly GrantEntry[];
}

/** Waiters an answer shows (those a turn or a preemption can be for). */
export const HEAD_SIZE = 16;

export type GrantOp =
  /**
   * join the queue or stay in it; granted when every waiter ahead fits too.
   * waitMs: dropped if not asked again within it. requeue: the key's session
   * ended, so a grant it still holds is given up and it asks again at the
   * back of the queue (break before make, in the same step)
   */
  | { op: 'ask'; priority: number; weight: number; waitMs: number; lapseMs: number; note: GrantNote; requeue?: boolean }
  /** a session is there: the entry counts (waiting becomes granted); `create`: the note of an entry this creates (null: create none) */
  | { op: 'hold'; priority: number; weight: number; lapseMs: number; note: GrantNote; create: GrantNote | null }
  /** nothing of the key counts any more */
  | { op: 'release' }
  /** renew the key's entry, if any; change nothing else */
  | { op: 'look' };

export type GrantAnswer =
  /** position: 1-based among the waiters (0: not waiting) */
  | { ok: true; granted: boolean; entry: GrantEntry | null; position: number; table: GrantTable }
  | { ok: false; reason: string };

/** Every entry, for a status table: the holders, then the queue in order. */
export type GrantList = { ok: true; table: GrantTable; queue: readonly GrantEntry[] } | { ok: false; reason: string };

export interface GrantPool {
  /** one operation on one key, atomic, answered with the table */
  sync(key: string, op: GrantOp): Promise<GrantAnswer>;
  /** at deploy: the configured rules; a limit set at run time is kept unless the configured limit changed since */
  configure(rules: PoolRules): Promise<void>;
  /** the limit at run time (kept across restarts; with replicas, fleet-wide) */
  setLimit(limit: Pick<PoolRules, 'limit' | 'budgetKW'>): Promise<GrantList>;
  list(): Promise<GrantList>;
  /**
   * Told after every change of the table; `mayAdmit` when the change may let
   * a waiter in (a grant released or lapsed, a waiter gone, a weight lowered,
   * the limit changed). Returns the unsubscribe.
   */
  onChange(fn: (mayAdmit: boolean) => void): () => void;
}

/** What a pool alone keeps across restarts (the depot's context store): one record per key, and the limits. */
export interface GrantStore {
  load(): Promise<{ entries: unknown[]; limits: unknown } | null>;
  /** resolves when the store has it: a grant is answered only then */
  save(key: string, entry: KeptGrant | undefined): Promise<void>;
  saveLimits(limits: KeptLimits): Promise<void>;
}

export interface KeptGrant {
  key: string;
  state: 'granted' | 'waiting';
  priority: number;
  weight: number;
  askedAt: number;
  since: number;
  waitMs: number;
  lapseMs: number;
  note: GrantNote;
}

export interface KeptLimits {
  limit: number | null;
  budgetKW: number | null;
  /** the configured limit when this one was set: a configuration changed since wins over a run-time limit */
  configured: { limit: number | null; budgetKW: number | null };
}

/** The pool's clock alone: wall-clock ms when the process began, moved on by the monotonic clock (a wall clock set back changes nothing). */
export function poolClock(): () => number {
  const base = Date.now() - monotonicNow();
  return () => Math.round(base + monotonicNow());
}

/** The seam's grants: one pool per name. */
export interface Grants {
  /** the pool of this name (a depot), shared by every caller that names it; alone, kept in `local` */
  open(pool: string, local: GrantStore): GrantPool;
}

/** A pool that answers unavailable (a store that cannot be asked): no grant, so no START, and running sessions are left alone. */
export class UnavailablePool implements GrantPool {
  constructor(private readonly reason: string) {}
  sync(): Promise<GrantAnswer> {
    return Promise.resolve({ ok: false, reason: this.reason });
  }
  configure(): Promise<void> {
    return Promise.resolve();
  }
  setLimit(): Promise<GrantList> {
    return Promise.resolve({ ok: false, reason: this.reason });
  }
  list(): Promise<GrantList> {
    return Promise.resolve({ ok: false, reason: this.reason });
  }
  onChange(): () => void {
    return () => undefined;
  }
}
