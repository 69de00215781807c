/**
 * A lease scope through Redis (docs/fleet.md, "Leases and hand-over"): which
 * replica acts on which item of one list (a watch node's tokens, a control
 * node's targets; the scope has the same name on every replica).
 *
 * - The list lives in Redis (item-list.ts), read when its version moved.
 * - Every cycle a replica renews its membership of the scope and reads the
 *   live members (scope-members.ts); rendezvous hashing over them says which
 *   items it should hold.
 * - It holds a lease per item (lease-batch.ts), and acts on an item only while
 *   its lease is valid by its own monotonic clock: from the moment the renewal
 *   was *sent* plus the lease time, less a safety margin. Redis sets the expiry
 *   later than that, so a replica stops before any other can take the lease,
 *   even when it lost Redis.
 * - An item that hashing gives to another replica is dropped locally first
 *   (onChange), then its lease is deleted (only if still ours): the new holder
 *   takes it at its next cycle. A replica killed without releasing: its
 *   membership and its leases lapse after the lease time, and the others take
 *   over at their next cycle: within the lease time plus one cycle.
 * - Each item's state is committed with a revision (state-commit.ts), exactly
 *   once; the caller commits, then tells what was committed.
 * - Redis lost its data (recovery.ts): the list and the newest states known
 *   are put back, and an item taken with no state waits for them.
 * - Messages for the holder (inbox.ts) are read for the items held here after
 *   each cycle.
 */
import { debuglog } from 'node:util';
import { monotonicNow } from '../../clock';
import type { CommitResult, LeaseChange, LeaseScope, LeaseScopeOptions, Posted, ReleasedItem, ReleaseReason, AcquiredItem } from '../../coordination/leases';
import { ChargingError } from '../../errors';
import { retryUntil, RIDE_THROUGH_MS, transient } from '../redis/retry';
import type { FleetConnection } from '../redis/connection';
import { FailureReporter } from '../redis/health';
import type { ScopeKeys } from '../redis/keys';
import { Rendezvous } from '../membership/rendezvous';
import { Inbox } from './inbox';
import { ItemList } from './item-list';
import { leaseBatches } from './lease-batch';
import { DataLossWatch, RESTORE_STATES } from './recovery';
import { SCOPE_LEAVE, scopeHeartbeat } from './scope-members';
import { decodeState } from './state-codec';
import { commitOnce } from './state-commit';
import { Holdings, type Held } from './holdings';

/** NODE_DEBUG=charging-fleet (lines start with Date.now()): each lease gained or lost, each commit's answer and each restore, on stderr (the nemesis's evidence). */
const trace = debuglog('charging-fleet');

/** What a scope needs from its fleet. */
export interface ScopeContext {
  connection: FleetConnection;
  replicaId: string;
  leaseMs: number;
  cycleMs: number;
  /** asks the fleet for a cycle soon (after a change of the list) */
  kick(): void;
  /** the fleet forgets the scope (it closed) */
  forget(): void;
  now?: () => number;
}

export class RedisLeaseScope<S> implements LeaseScope<S> {
  readonly lapses = true;
  private readonly held: Holdings;
  private readonly loss: DataLossWatch;
  private readonly list: ItemList;
  private readonly inbox: Inbox | null;
  private live: string[] = [];
  private closed = false;
  private standingDown = false;
  private running: Promise<void> | null = null;
  private readonly failures: FailureReporter;
  private readonly now: () => number;
  /** lease time less the margin for latency and clock-rate drift */
  private readonly validMs: number;
  /** how long a commit whose answer was lost is retried (with the same id) before the caller hears "unavailable" */
  private readonly commitRetryMs: number;

  constructor(
    readonly name: string,
    private readonly ctx: ScopeContext,
    private readonly keys: ScopeKeys,
    private readonly options: LeaseScopeOptions<S> = {},
  ) {
    this.now = ctx.now ?? monotonicNow;
    this.held = new Holdings(this.now);
    this.failures = new FailureReporter(ctx.connection, options.onError);
    this.validMs = ctx.leaseMs - Math.max(50, Math.min(1000, ctx.leaseMs / 10));
    this.commitRetryMs = Math.max(2 * ctx.leaseMs, 10_000);
    this.loss = new DataLossWatch(ctx.cycleMs, this.now);
    this.list = new ItemList(ctx.connection, keys);
    this.inbox = options.inbox === undefined ? null : new Inbox(ctx.connection, keys.inbox);
  }

  get leaseMs(): number {
    return this.ctx.leaseMs;
  }

  get up(): boolean {
    return this.ctx.connection.health.up;
  }

  holds(item: string): boolean {
    return !this.closed && this.held.valid(item);
  }

  owned(): string[] {
    return this.held.items().filter((t) => this.holds(t));
  }

  items(): string[] {
    return [...this.list.items];
  }

  /** The live replicas of this scope at the last cycle (sorted). */
  replicas(): string[] {
    return [...this.live];
  }

  /** Another server answers (connection.ts): the states this replica knows are put back at the next cycle (recovery.ts). */
  serverChanged(): void {
    this.loss.serverChanged(this.ctx.connection.sentinels !== null);
    this.ctx.kick();
  }

  /** Gives this replica's share to the others (true) or takes it back (false), from the next cycle on. */
  standDown(on: boolean): void {
    if (this.standingDown === on) return;
    this.standingDown = on;
    this.ctx.kick();
  }

  async add(items: Iterable<string>): Promise<void> {
    await this.changeList('+', [...items]);
  }

  async remove(items: Iterable<string>): Promise<void> {
    await this.changeList('-', [...items]);
  }

  /**
   * Keeps an item's new state, only while no other replica holds its lease
   * and nobody wrote since. Tell the change only when the result is ok;
   * otherwise keep the previous state and decide again. Never throws.
   */
  commit(item: string, state: S | null): Promise<CommitResult> {
    const h = this.held.get(item);
    // The lease as Redis holds it decides (COMMIT_STATE), not its local validity: an answer got just before this
    // process stood still past that validity is still committed while no other replica could take the lease.
    if (!h || !h.announced || this.closed) return Promise.resolve({ ok: false, reason: 'not-owner', message: `${item} is not held by this replica` });
    h.pending++;
    const next = h.chain.then(() => this.commitNow(item, h, state)).finally(() => h.pending--);
    h.chain = next.catch(() => undefined);
    return next;
  }

  post(item: string, text: string): Promise<number | null> {
    if (!this.inbox) return Promise.reject(new ChargingError('INTERNAL', `Scope ${this.name} takes no messages`));
    return this.inbox.post(item, text);
  }

  newest(items: string[]): Promise<Map<string, Posted | null>> {
    return this.inbox ? this.inbox.newest(items) : Promise.resolve(new Map());
  }

  onHealth(listener: (up: boolean) => void): () => void {
    return this.ctx.connection.onHealth((h) => listener(h.up));
  }

  /** One cycle: membership, list, leases, messages. Run by the fleet's loop; never throws. */
  cycle(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.running ??= this.runCycle().finally(() => (this.running = null));
    return this.running;
  }

  /** Stops acting on everything, gives the leases back and leaves the scope, so that others take over at once. */
  async close(forget = false): Promise<void> {
    if (this.closed) return;
    if (forget) await this.remove(this.list.items).catch(() => undefined);
    const items = new Set(this.held.items());
    this.drop([...items], 'closed', 'the scope was closed');
    this.closed = true;
    this.ctx.forget();
    // A cycle on its way may still take leases: let it end (bounded by the command timeout), then give back all.
    await this.running?.catch(() => undefined);
    for (const t of this.held.items()) items.add(t);
    this.held.clear();
    try {
      await leaseBatches(this.ctx.connection, (t) => this.keys.lease(t), this.who(), [], [...items], () => undefined);
      await this.ctx.connection.eval(SCOPE_LEAVE.call({ members: this.keys.members }, { replica: this.ctx.replicaId }));
      if (forget) await this.inbox?.forget();
    } catch {
      // Redis away or already closed: the leases lapse by themselves
    }
  }

  private who() {
    return { replica: this.ctx.replicaId, leaseMs: this.ctx.leaseMs, now: this.now };
  }

  private async changeList(op: '+' | '-', items: string[]): Promise<void> {
    if (this.closed) throw new ChargingError('CLOSED', 'The list was closed');
    if (items.length === 0) return;
    // Idempotent: tried again while Redis does not take it (a failover), so that a wish or a watch given then is kept.
    await retryUntil(() => this.list.change(op, items), { deadline: monotonicNow() + RIDE_THROUGH_MS, now: monotonicNow, stop: (err) => this.closed || !transient(err) });
    this.ctx.kick();
  }

  private async runCycle(): Promise<void> {
    this.expireLapsed();
    try {
      await this.heartbeat();
      if (this.closed) return;
      await this.syncLeases();
      this.failures.succeeded();
    } catch (err) {
      if (!this.closed) this.failures.failed(err, `scope ${this.name}`);
    }
    if (!this.closed) await this.readMessages();
  }

  /** One commit of a held item, and what its answer means for the hold (state-commit.ts). */
  private async commitNow(item: string, h: Held, state: S | null): Promise<CommitResult> {
    if (this.held.get(item) !== h || this.closed) return { ok: false, reason: 'not-owner', message: `${item} is no longer held by this replica` };
    const from = h.rev;
    const at = { lease: this.keys.lease(item), state: this.keys.state, replica: this.ctx.replicaId, item };
    const answer = await commitOnce(this.ctx.connection, at, h, state === null ? '' : JSON.stringify(state), {
      retryMs: this.commitRetryMs,
      now: this.now,
      heldByClock: () => this.held.get(item) === h && !this.closed && this.now() < h.validUntil,
    });
    if ('ok' in answer) return answer;
    if (trace.enabled) trace('%d %s %s commit %s from %d (%s): %j', Date.now(), this.ctx.replicaId, this.name, item, from, state === null ? 'no session' : 'session', answer);
    if (answer.kind === 'written') {
      h.rev = answer.rev;
      this.loss.remember(item, answer.rev, state);
      return { ok: true, rev: answer.rev };
    }
    if (answer.kind === 'stale' && answer.rev === 0 && h.rev > 0) {
      // Redis holds no state for an item whose lease is ours: it lost its data. Ours is the best there is: written from nothing.
      h.rev = 0;
      return this.commitNow(item, h, state);
    }
    const stale = answer.kind === 'stale';
    const message = stale ? `the state of ${item} was changed by another replica` : `the lease on ${item} is not this replica's`;
    if (this.held.get(item) === h) this.drop([item], 'lease-lost', `lease lost at ${new Date().toISOString()} (${message})`);
    return { ok: false, reason: stale ? 'stale' : 'not-owner', message };
  }

  /** Renews this replica's membership, reads the live members and, when it moved, the list; puts back what Redis lost. */
  private async heartbeat(): Promise<void> {
    // Standing down: out of the members, so that rendezvous gives this replica nothing (its leases go at this cycle).
    const beat = await scopeHeartbeat(this.ctx.connection, this.keys, { replica: this.ctx.replicaId, leaseMs: this.ctx.leaseMs, leave: this.standingDown }, { ...this.loss.heartbeatArgs(), members: this.live });
    this.live = beat.live;
    this.loss.heard(beat.epoch, beat.markLeftMs, beat.version === null && this.list.size > 0, beat.restores);
    if (this.loss.mustRestore) {
      // Redis lost its data (recovery.ts): put back the list we knew, and the newest states we know: whoever
      // takes an item next resumes from them rather than from nothing (a lost ended).
      if (trace.enabled) trace('%d %s %s restores the list and its known states', Date.now(), this.ctx.replicaId, this.name);
      await this.changeList('+', [...this.list.items]);
      await this.restoreStates();
      return;
    }
    if (this.loss.mustRestoreStates) {
      if (trace.enabled) trace('%d %s %s puts its known states back (another server answers)', Date.now(), this.ctx.replicaId, this.name);
      await this.restoreStates();
    }
    if (await this.list.follow(beat.version)) this.loss.keepOnly(this.list.items);
  }

  /** Only over an older state or none; a holder with an older one reloads when it sees the restore counted (reload). */
  private async restoreStates(): Promise<void> {
    const keys = { state: this.keys.state, lossMark: this.keys.lossMark, restores: this.keys.restores };
    await this.ctx.connection.eval(RESTORE_STATES.call(keys, { replica: this.ctx.replicaId }, { args: this.loss.restoreArgs() }));
    this.loss.restored();
  }

  private async syncLeases(): Promise<void> {
    const hrw = new Rendezvous(this.live);
    const me = this.ctx.replicaId;
    const wanted = [...this.list.items].filter((t) => hrw.ownerOf(t) === me);
    const wantedSet = new Set(wanted);
    const leaving = this.held.items().filter((t) => !wantedSet.has(t));
    // Stop acting first, then give the lease back: never a moment with two holders acting.
    for (const t of leaving) {
      const reason: ReleaseReason = this.list.has(t) ? 'rebalanced' : 'unwatched';
      this.drop([t], reason, reason === 'rebalanced' ? 'another replica holds it now' : 'it is no longer on the list');
    }
    // Recorded even when closed meanwhile: close() gives back every lease held, these included.
    await leaseBatches(this.ctx.connection, (t) => this.keys.lease(t), this.who(), wanted, leaving, (t, result, sentAt) => {
      if (this.held.renewed(t, result, sentAt + this.validMs) === 'lost') this.drop([t], 'lease-lost', `lease lost at ${new Date().toISOString()} (another replica holds it)`);
    });
    // Taken now, and taken earlier but held back (recovery.ts): announced once their states are known.
    const unannounced = this.held.unannounced();
    if (unannounced.length > 0 && !this.closed) await this.announce(unannounced);
    if (this.loss.mustReload && !this.closed) await this.reload();
  }

  /**
   * Loads the states of newly held items and tells the caller. While a loss
   * of Redis's data is marked, an item Redis holds no state for stays held
   * back: its last holder may still put it back (recovery.ts).
   */
  private async announce(items: string[]): Promise<void> {
    let raw: Array<string | null>;
    try {
      raw = await this.ctx.connection.run('loading states', (r) => r.hmget(this.keys.state, ...items));
    } catch (err) {
      // Without the states we must not act: give the leases up locally; the next cycle tries again.
      for (const t of items) this.held.release(t);
      throw err;
    }
    if (this.closed) return;
    const acquired: AcquiredItem<S>[] = [];
    const holdBack = this.loss.holdingBack;
    items.forEach((item, i) => {
      const h = this.held.get(item);
      if (!h || h.announced) return;
      const saved = decodeState<S>(raw[i]);
      if (!saved && holdBack) return;
      h.rev = saved?.rev ?? 0;
      h.announced = true;
      if (saved) this.loss.remember(item, saved.rev, saved.state);
      acquired.push({ item, saved });
    });
    if (acquired.length > 0) this.tell({ acquired, released: [] });
  }

  /** A replica put states back (recovery.ts): an item held with an older state than Redis's now resumes from Redis's. */
  private async reload(): Promise<void> {
    const announced = this.held.announced();
    const items = this.held.announced(true);
    const any = this.loss.reloadsAny;
    const raw = items.length === 0 ? [] : await this.ctx.connection.run('loading states', (r) => r.hmget(this.keys.state, ...items));
    if (items.length === announced.length) this.loss.reloaded(); // else again at the next cycle, once their commits are answered
    const newer: AcquiredItem<S>[] = [];
    items.forEach((item, i) => {
      const h = this.held.get(item);
      const saved = decodeState<S>(raw[i]);
      if (!h?.announced || h.pending > 0 || !saved || (any ? saved.rev === h.rev : saved.rev <= h.rev)) return;
      h.rev = saved.rev;
      if (any) this.loss.resumedFrom(item, saved.rev, saved.state);
      else this.loss.remember(item, saved.rev, saved.state);
      newer.push({ item, saved });
    });
    if (newer.length > 0 && !this.closed) this.tell({ acquired: newer, released: newer.map(({ item }) => ({ item, reason: 'restored', message: any ? 'another primary answers, with another state' : 'a newer state was put back after Redis lost its data' })) });
  }

  /** The newest message of each item held here, to the caller after each cycle. */
  private async readMessages(): Promise<void> {
    const onMessages = this.options.onMessages;
    if (!this.inbox || !onMessages) return;
    const newest = await this.inbox.newest(this.owned());
    const posted = new Map<string, Posted>();
    for (const [item, m] of newest) if (m) posted.set(item, m);
    if (posted.size === 0 || this.closed) return;
    try {
      onMessages(posted);
    } catch (err) {
      this.failures.failed(new ChargingError('INTERNAL', `Messages of scope ${this.name}: ${(err as Error)?.message ?? String(err)}`), 'messages');
    }
  }

  /** Local leases past their validity: stop acting on them and say when they were lost. */
  private expireLapsed(): void {
    const why = this.ctx.connection.health.reason ?? 'Redis answered too late';
    const lapsed: ReleasedItem[] = this.held.lapsed().map(({ item, agoMs }) => ({ item, reason: 'lease-lost', message: `lease lost at ${new Date(Date.now() - agoMs).toISOString()} (not renewed in time: ${why})` }));
    if (lapsed.length > 0) this.tell({ acquired: [], released: lapsed });
  }

  private drop(items: string[], reason: ReleaseReason, message: string): void {
    const released: ReleasedItem[] = [];
    for (const item of items) if (this.held.release(item)) released.push({ item, reason, message });
    if (released.length > 0) this.tell({ acquired: [], released });
  }

  private tell(change: LeaseChange<S>): void {
    if (trace.enabled) {
      const acquired = change.acquired.map((a) => `${a.item}@${a.saved ? `${a.saved.rev}${a.saved.state === null ? '/none' : ''}` : 'nothing'}`);
      trace('%d %s %s acquired [%s] released [%s]', Date.now(), this.ctx.replicaId, this.name, acquired.join(' '), change.released.map((r) => `${r.item}:${r.reason}`).join(' '));
    }
    try {
      this.options.onChange?.(change);
    } catch (err) {
      if (!this.closed) this.failures.failed(new ChargingError('INTERNAL', `Lease change of scope ${this.name}: ${(err as Error)?.message ?? String(err)}`), 'scope');
    }
  }
}
