/**
 * The grants of a process alone (LocalCoordination): the table in memory,
 * each change kept in the GrantStore (the depot's context store) before it
 * is answered, the queue in order after a restart. A restart counts the
 * charging cars again before it grants anyone new: until every grant it kept
 * is held, asked or released again by its key, or `recountMs` has passed, no
 * new grant is given (the kept grants count all along).
 */
import { keptOf, readKept, readLimits, sameKept } from './grant-kept';
import {
  type GrantAnswer, type GrantEntry, type GrantList, type GrantOp, type GrantPool, type GrantStore, type GrantTable,
  HEAD_SIZE, type KeptGrant, type KeptLimits, type PoolRules, poolClock,
} from './grants';

interface Live extends GrantEntry {
  waitMs: number;
  lapseMs: number;
  /** the pool's busy clock at its last renewal */
  renewedBusy: number;
  /** the queue's order: askedAt less what its priority is worth */
  rank: number;
}

/** Strict priority (agingMs 0): a priority level outweighs any wait (a pool clock in ms stays below 2^42 until the year 2109). */
const STRICT = 2 ** 42;
/** A pool keeps at most this many entries: a flow sending endless new targets meets a refusal, not a slow leak. */
export const MAX_ENTRIES = 10_000;
const EPS = 1e-9;

export interface GrantPoolOptions {
  store: GrantStore;
  /** the pool's clock (default: poolClock()) */
  now?: () => number;
  /** after a restart, new grants wait until every kept grant is confirmed or this passes, ms */
  recountMs?: number;
  /** an entry dropped without its key's release: a waiter not asked again, a grant nobody renewed */
  onDropped?(entry: GrantEntry, why: 'expired' | 'lapsed'): void;
}

export class LocalGrantPool implements GrantPool {
  private readonly entries = new Map<string, Live>();
  /** the waiting entries in order */
  private queue: Live[] = [];
  private rules: PoolRules = { limit: null, budgetKW: null, agingMs: 0 };
  private configured: KeptLimits['configured'] = { limit: null, budgetKW: null };
  private inUse = 0;
  private usedKW = 0;
  private overSince: number | null = null;
  /**
   * The latest renewal of any entry, and the pool's busy clock: the time
   * with renewals, each silence of the whole pool counted at most a
   * twentieth of the renewer's lapseMs (its check interval). A grant lapses
   * when the busy clock passed its lapseMs since its renewal: never because
   * nobody could reach the pool (Redis away, every process down).
   */
  private newest = -Infinity;
  private busy = 0;
  private lastSweep = -Infinity;
  private readonly unconfirmed = new Set<string>();
  private recountUntil = -Infinity;
  private readonly listeners = new Set<(mayAdmit: boolean) => void>();
  /** the holders in order of since, kept until the set of holders changes (a table per check must not sort a thousand) */
  private holders: Live[] | null = null;
  private readonly now: () => number;
  private readonly ready: Promise<void>;

  constructor(private readonly o: GrantPoolOptions) {
    this.now = o.now ?? poolClock();
    this.ready = this.load();
  }

  async sync(key: string, op: GrantOp): Promise<GrantAnswer> {
    await this.ready;
    const now = this.now();
    this.sweep(now);
    const before = this.entries.get(key);
    const kept = before && keptOf(before);
    let granted = false;
    if (op.op === 'ask') granted = this.ask(key, op, now);
    else if (op.op === 'hold') this.hold(key, op, now);
    else if (op.op === 'release') this.remove(key, now);
    else if (before) this.renew(before, now);
    if (op.op !== 'look') this.unconfirmed.delete(key);
    const after = this.entries.get(key);
    const changed = !sameKept(kept, after && keptOf(after));
    const mayAdmit = (before !== undefined && after === undefined) || (before !== undefined && after !== undefined && after.weight < before.weight - EPS && kept?.state === 'granted');
    if (changed) {
      try {
        await this.o.store.save(key, after && keptOf(after));
      } catch (err) {
        this.restore(key, before, kept, now);
        return { ok: false, reason: `the depot could not keep its table (${(err as Error)?.message ?? String(err)})` };
      }
      this.changed(mayAdmit);
    }
    return this.answer(key, granted, now);
  }

  async configure(rules: PoolRules): Promise<void> {
    await this.ready;
    const configured = { limit: rules.limit, budgetKW: rules.budgetKW };
    // A limit set at run time outlives a redeploy, unless the configuration's own limit changed since.
    const keepRunTime = this.configured.limit === rules.limit && this.configured.budgetKW === rules.budgetKW;
    const limits = keepRunTime ? { limit: this.rules.limit, budgetKW: this.rules.budgetKW } : configured;
    this.configured = configured;
    this.setRules({ ...limits, agingMs: rules.agingMs });
    if (!keepRunTime) await this.o.store.saveLimits({ ...limits, configured }).catch(() => undefined);
    this.changed(true);
  }

  async setLimit(limit: Pick<PoolRules, 'limit' | 'budgetKW'>): Promise<GrantList> {
    await this.ready;
    try {
      await this.o.store.saveLimits({ limit: limit.limit, budgetKW: limit.budgetKW, configured: this.configured });
    } catch (err) {
      return { ok: false, reason: `the depot could not keep its limit (${(err as Error)?.message ?? String(err)})` };
    }
    this.setRules({ ...this.rules, ...limit });
    this.changed(true);
    return this.list();
  }

  async list(): Promise<GrantList> {
    await this.ready;
    const now = this.now();
    this.sweep(now);
    return { ok: true, table: this.table(now), queue: this.queue.map(copy) };
  }

  onChange(fn: (mayAdmit: boolean) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private ask(key: string, op: Extract<GrantOp, { op: 'ask' }>, now: number): boolean {
    if (op.requeue && this.entries.get(key)?.state === 'granted') this.remove(key, now);
    let e = this.entries.get(key);
    if (!e) {
      if (this.entries.size >= MAX_ENTRIES) return false;
      e = { key, state: 'waiting', priority: op.priority, weight: op.weight, askedAt: now, since: now, renewedAt: now, renewedBusy: this.busy, note: { ...op.note }, waitMs: op.waitMs, lapseMs: op.lapseMs, rank: 0 };
      e.rank = this.rankOf(e);
      this.entries.set(key, e);
      this.enqueue(e);
    } else {
      e.note = { ...e.note, ...op.note };
      e.waitMs = op.waitMs;
      e.lapseMs = op.lapseMs;
      if (e.state === 'waiting') {
        e.weight = op.weight;
        if (e.priority !== op.priority) {
          e.priority = op.priority;
          this.dequeue(e);
          e.rank = this.rankOf(e);
          this.enqueue(e);
        }
      }
    }
    this.renew(e, now);
    if (e.state === 'granted') return true;
    if (!this.fits(e, now)) return false;
    this.dequeue(e);
    e.state = 'granted';
    e.since = now;
    this.count(e, 1);
    this.updateOver(now, false);
    return true;
  }


  private hold(key: string, op: Extract<GrantOp, { op: 'hold' }>, now: number): void {
    let e = this.entries.get(key);
    if (!e) {
      if (!op.create || this.entries.size >= MAX_ENTRIES) return;
      e = { key, state: 'granted', priority: op.priority, weight: 0, askedAt: now, since: now, renewedAt: now, renewedBusy: this.busy, note: { ...op.create }, waitMs: 0, lapseMs: op.lapseMs, rank: 0 };
      this.entries.set(key, e);
      this.count(e, 1);
    } else if (e.state === 'waiting') {
      // A session came while it waited (the driver at the station): it counts from now.
      this.dequeue(e);
      e.state = 'granted';
      e.since = now;
      e.weight = 0;
      this.count(e, 1);
    }
    this.renew(e, now);
    this.usedKW += op.weight - e.weight;
    e.weight = op.weight;
    e.priority = op.priority;
    e.lapseMs = op.lapseMs;
    e.note = { ...e.note, ...op.note };
    this.updateOver(now, false);
  }

  private remove(key: string, now: number): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    if (e.state === 'waiting') return this.dequeue(e);
    this.count(e, -1);
    this.updateOver(now, true);
  }

  private renew(e: Live, now: number): void {
    if (now > this.newest) {
      if (this.newest > -Infinity) this.busy += Math.min(now - this.newest, e.lapseMs / 20);
      this.newest = now;
    }
    e.renewedAt = now;
    e.renewedBusy = this.busy;
  }

  /** In order, and every waiter ahead of it fits too: no overtaking a head that does not fit. */
  private fits(e: Live, now: number): boolean {
    if (this.unconfirmed.size > 0 && now < this.recountUntil) return false;
    const { limit, budgetKW } = this.rules;
    // Not configured yet (or a limit that cannot be read): nobody is granted.
    if (limit === null && budgetKW === null) return false;
    let n = this.inUse;
    let kw = this.usedKW;
    for (const q of this.queue) {
      n++;
      kw += q.weight;
      if ((limit !== null && n > limit) || (budgetKW !== null && kw > budgetKW + EPS)) return false;
      if (q === e) return true;
    }
    return false;
  }

  private count(e: Live, sign: 1 | -1): void {
    this.holders = null;
    this.inUse += sign;
    this.usedKW += sign * e.weight;
    if (this.inUse === 0) this.usedKW = 0; // no float dust left behind
  }

  /** Over the limit since when; a grant freed while over starts the wait again (one shed per overFor). */
  private updateOver(now: number, freed: boolean): void {
    const { limit, budgetKW } = this.rules;
    const over = (limit !== null && this.inUse > limit) || (budgetKW !== null && this.usedKW > budgetKW + EPS);
    if (!over) this.overSince = null;
    else if (this.overSince === null || freed) this.overSince = now;
  }

  private rankOf(e: Pick<Live, 'askedAt' | 'priority'>): number {
    return e.askedAt - e.priority * (this.rules.agingMs > 0 ? this.rules.agingMs : STRICT);
  }

  private enqueue(e: Live): void {
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(this.queue[mid], e)) lo = mid + 1;
      else hi = mid;
    }
    this.queue.splice(lo, 0, e);
  }

  private dequeue(e: Live): void {
    const i = this.queue.indexOf(e);
    if (i >= 0) this.queue.splice(i, 1);
  }

  private setRules(rules: PoolRules): void {
    const reRank = rules.agingMs !== this.rules.agingMs;
    this.rules = rules;
    if (reRank) {
      for (const e of this.queue) e.rank = this.rankOf(e);
      this.queue.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
    }
    this.updateOver(this.now(), false);
  }

  /** Waiters not asked again within their waitMs go; a grant lapses when unrenewed for its lapseMs while others were renewed. At most once a second. */
  private sweep(now: number): void {
    if (now - this.lastSweep < 1000) return;
    this.lastSweep = now;
    for (const e of [...this.entries.values()]) {
      const expired = e.state === 'waiting' && now - e.renewedAt > e.waitMs;
      const lapsed = e.state === 'granted' && this.busy - e.renewedBusy > e.lapseMs;
      if (!expired && !lapsed) continue;
      this.remove(e.key, now);
      this.unconfirmed.delete(e.key);
      void this.o.store.save(e.key, undefined).catch(() => undefined);
      this.o.onDropped?.(copy(e), expired ? 'expired' : 'lapsed');
      this.changed(true);
    }
  }

  /** A change the store could not keep is undone: no grant without its record. */
  private restore(key: string, before: Live | undefined, kept: KeptGrant | undefined, now: number): void {
    this.remove(key, now);
    if (!before || !kept) return;
    const e: Live = { ...before, ...kept, rank: before.rank, note: { ...kept.note } };
    this.entries.set(key, e);
    if (e.state === 'waiting') this.enqueue(e);
    else this.count(e, 1);
    this.updateOver(now, false);
  }

  private changed(mayAdmit: boolean): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(mayAdmit);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private answer(key: string, granted: boolean, now: number): GrantAnswer {
    const e = this.entries.get(key);
    const position = e?.state === 'waiting' ? this.queue.indexOf(e) + 1 : 0;
    return { ok: true, granted: granted && e?.state === 'granted', entry: e ? copy(e) : null, position, table: this.table(now) };
  }

  /**
   * The table as an answer shows it. Its entries are the pool's own (read-only
   * by type): a view at the moment of the answer, to be read before the next
   * operation. The holders' order is kept until the holders change.
   */
  private table(now: number): GrantTable {
    if (!this.holders) {
      this.holders = [];
      for (const e of this.entries.values()) if (e.state === 'granted') this.holders.push(e);
      this.holders.sort((a, b) => a.since - b.since || (a.key < b.key ? -1 : 1));
    }
    return {
      now, limit: this.rules.limit, budgetKW: this.rules.budgetKW, agingMs: this.rules.agingMs,
      inUse: this.inUse, usedKW: this.usedKW, waiting: this.queue.length, overSince: this.overSince,
      holders: this.holders, head: this.queue.slice(0, HEAD_SIZE),
    };
  }

  /** The kept table back: the queue in its order, every grant counted and unconfirmed until its key is seen again. */
  private async load(): Promise<void> {
    let kept: Awaited<ReturnType<GrantStore['load']>> = null;
    try {
      kept = await this.o.store.load();
    } catch {
      kept = null; // a store that cannot be read: the pool starts empty, and each session counts again at its first check
    }
    const now = this.now();
    const limits = readLimits(kept?.limits);
    if (limits) {
      this.configured = limits.configured;
      this.rules = { ...this.rules, limit: limits.limit, budgetKW: limits.budgetKW };
    }
    for (const raw of (kept?.entries ?? []).slice(0, MAX_ENTRIES)) {
      const k = readKept(raw);
      if (!k || this.entries.has(k.key)) continue;
      // Nobody could renew while the process was away: renewed now.
      const e: Live = { ...k, renewedAt: now, renewedBusy: this.busy, rank: 0 };
      e.rank = this.rankOf(e);
      this.entries.set(e.key, e);
      if (e.state === 'waiting') this.enqueue(e);
      else {
        this.count(e, 1);
        this.unconfirmed.add(e.key);
      }
    }
    this.newest = now;
    this.recountUntil = now + (this.o.recountMs ?? 120_000);
    this.updateOver(now, false);
  }
}

function before(a: Live, b: Live): boolean {
  return a.rank !== b.rank ? a.rank < b.rank : a.askedAt !== b.askedAt ? a.askedAt < b.askedAt : a.key < b.key;
}

function copy(e: Live): GrantEntry {
  return { key: e.key, state: e.state, priority: e.priority, weight: e.weight, askedAt: e.askedAt, since: e.since, renewedAt: e.renewedAt, note: { ...e.note } };
}
