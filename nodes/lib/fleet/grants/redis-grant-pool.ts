/**
 * A grant pool in Redis (the seam's grants with *Coordinate replicas*;
 * nodes/lib/coordination/grants.ts): a depot's slots shared by every replica,
 * each operation one script on Redis's clock (grant-scripts.ts), so a control
 * check costs one round trip. The same rules as the local pool.
 *
 * - Redis away, or an answer that never came: `unavailable` (no grant, so no
 *   START; running sessions are left alone). An `ask` whose answer was lost
 *   may have granted: the grant is the key's, and its next check finds it.
 * - Redis lost the pool (restarted without its data, a failover to a replica
 *   behind): the next script puts the configured rules back. When this
 *   replica had seen the pool before (its epoch), nobody new is granted for
 *   recountMs, so that the sessions still charging are counted again first
 *   (each control check holds its session). A replica that never saw the
 *   pool cannot tell a loss from a new pool.
 * - Another replica's change: each fleet cycle looks at the pool's version
 *   (while anyone listens), so a slot freed elsewhere pokes the waiters here.
 */
import { ChargingError } from '../../errors';
import type { GrantAnswer, GrantEntry, GrantList, GrantOp, GrantPool, GrantTable, PoolRules } from '../../coordination/grants';
import { MAX_ENTRIES } from '../../coordination/grant-pool';
import type { FleetConnection } from '../redis/connection';
import type { ScriptCall } from '../redis/script';
import type { GrantKeys } from '../redis/keys';
import { GRANT_CONFIGURE, GRANT_LIST, GRANT_SET_LIMIT, GRANT_SYNC } from './grant-scripts';

export interface RedisGrantPoolOptions {
  connection: FleetConnection;
  keys: GrantKeys;
  /** after Redis lost the pool, new grants wait this long (default 120 s, as the local pool after a restart) */
  recountMs?: number;
  /** added to Redis's clock (tests move the pool's clock with it) */
  offsetMs?: () => number;
  /** runs `hook` at every fleet cycle; returns the way to stop */
  everyCycle(hook: () => Promise<void>): () => void;
}

interface Wire {
  table: GrantTable;
  version?: number;
  epoch?: string;
}

export class RedisGrantPool implements GrantPool {
  private rules: PoolRules = { limit: null, budgetKW: null, agingMs: 0 };
  private epochSeen = '';
  private version = -1;
  private readonly listeners = new Set<(mayAdmit: boolean) => void>();
  private stopLooking: (() => void) | null = null;

  constructor(private readonly o: RedisGrantPoolOptions) {}

  async sync(key: string, op: GrantOp): Promise<GrantAnswer> {
    const args = {
      key,
      op: op.op,
      priority: 'priority' in op ? op.priority : 0,
      weight: 'weight' in op ? op.weight : 0,
      waitMs: op.op === 'ask' ? op.waitMs : 0,
      lapseMs: 'lapseMs' in op ? op.lapseMs : 0,
      note: JSON.stringify('note' in op ? op.note : {}),
      requeue: op.op === 'ask' && op.requeue ? '1' : '0',
      create: op.op === 'hold' && op.create ? JSON.stringify(op.create) : '',
      maxEntries: MAX_ENTRIES,
    };
    let res: Wire & { granted: boolean; entry: GrantEntry | null; position: number; changed: boolean; mayAdmit: boolean };
    try {
      const p = this.pool();
      res = await this.send(GRANT_SYNC.call(p.keys, { ...p.args, ...args }));
    } catch (err) {
      return { ok: false, reason: this.reason(err) };
    }
    if (res.changed) this.tell(res.mayAdmit, res.version);
    return { ok: true, granted: res.granted, entry: res.entry === null ? null : entryOf(res.entry), position: res.position, table: tableOf(res.table) };
  }

  async configure(rules: PoolRules): Promise<void> {
    this.rules = { ...rules };
    try {
      const p = this.pool();
      const res = await this.send(GRANT_CONFIGURE.call(p.keys, p.args));
      this.tell(true, res.version);
    } catch {
      // Redis away: every operation carries the configured rules, and puts them back on a pool that has none.
    }
  }

  async setLimit(limit: Pick<PoolRules, 'limit' | 'budgetKW'>): Promise<GrantList> {
    try {
      const p = this.pool();
      const res = await this.send<Wire & { queue: GrantEntry[] }>(GRANT_SET_LIMIT.call(p.keys, { ...p.args, limit: limit.limit ?? '', budgetKW: limit.budgetKW ?? '' }));
      this.tell(true, res.version);
      return { ok: true, table: tableOf(res.table), queue: asArray<GrantEntry>(res.queue).map(entryOf) };
    } catch (err) {
      return { ok: false, reason: this.reason(err) };
    }
  }

  async list(): Promise<GrantList> {
    try {
      const p = this.pool();
      const res = await this.send<Wire & { queue: GrantEntry[] }>(GRANT_LIST.call(p.keys, p.args));
      return { ok: true, table: tableOf(res.table), queue: asArray<GrantEntry>(res.queue).map(entryOf) };
    } catch (err) {
      return { ok: false, reason: this.reason(err) };
    }
  }

  onChange(fn: (mayAdmit: boolean) => void): () => void {
    this.listeners.add(fn);
    this.stopLooking ??= this.o.everyCycle(() => this.look());
    return () => {
      this.listeners.delete(fn);
      if (this.listeners.size === 0) {
        this.stopLooking?.();
        this.stopLooking = null;
      }
    };
  }

  /** Once per fleet cycle: a change made by another replica is told here too. */
  private async look(): Promise<void> {
    let raw: string | null;
    try {
      raw = await this.o.connection.run('reading a depot', (r) => r.hget(this.o.keys.rules, 'version'));
    } catch {
      return;
    }
    const version = Number(raw ?? 0);
    if (version !== this.version) this.tell(true, version);
  }

  private tell(mayAdmit: boolean, version: number | undefined): void {
    if (version !== undefined) this.version = version;
    for (const fn of [...this.listeners]) {
      try {
        fn(mayAdmit);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /** The pool's keys, and the arguments every script takes first (its configured rules put back a pool Redis lost). */
  private pool() {
    const k = this.o.keys;
    return {
      keys: { entries: k.entries, queue: k.queue, holders: k.holders, waitExpiry: k.waitExpiry, lapses: k.lapses, rules: k.rules },
      args: {
        confLimit: this.rules.limit ?? '',
        confBudget: this.rules.budgetKW ?? '',
        agingMs: this.rules.agingMs,
        epochSeen: this.epochSeen,
        recountMs: this.o.recountMs ?? 120_000,
        offsetMs: this.o.offsetMs?.() ?? 0,
      },
    };
  }

  private async send<T extends Wire>(call: ScriptCall): Promise<T> {
    const res = JSON.parse(String(await this.o.connection.eval(call))) as T;
    if (typeof res.epoch === 'string') this.epochSeen = res.epoch;
    return res;
  }

  private reason(err: unknown): string {
    const e = err instanceof ChargingError ? err : this.o.connection.toError(err, 'depot');
    return `the depot's table in Redis could not be asked (${e.message})`;
  }
}

/** cjson writes an empty Lua table as {}: an array wherever one is meant. */
function asArray<T>(v: unknown): T[] {
  return Array.isArray(v) ? (v as T[]) : [];
}

function entryOf(e: GrantEntry): GrantEntry {
  const note = e.note && typeof e.note === 'object' && !Array.isArray(e.note) ? e.note : {};
  return { key: e.key, state: e.state, priority: e.priority, weight: e.weight, askedAt: e.askedAt, since: e.since, renewedAt: e.renewedAt, note };
}

function tableOf(t: GrantTable): GrantTable {
  return { ...t, holders: asArray<GrantEntry>(t.holders).map(entryOf), head: asArray<GrantEntry>(t.head).map(entryOf) };
}
