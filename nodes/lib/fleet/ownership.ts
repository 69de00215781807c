/**
 * Which replica polls which watched token (docs/fleet.md, "Leases and
 * hand-over"), for one watch scope: a watch node, which has the same id on
 * every replica.
 *
 * - The watch list lives in Redis (a set), read when its version changed.
 * - Every cycle a replica renews its membership of the scope (a sorted set
 *   scored on Redis's clock) and reads the live members; rendezvous hashing
 *   over them says which tokens it should own.
 * - It holds a lease per owned token (`SET lease NX PX`, renewed by a Lua
 *   check of the holder), and polls a token only while its lease is valid by
 *   its own monotonic clock: from the moment the renewal was *sent* plus the
 *   lease time, less a safety margin. Redis sets the expiry later than that,
 *   so a replica stops polling before any other can take the lease, even
 *   when it lost Redis.
 * - A token that hashing gives to another replica is dropped locally first
 *   (onChange), then its lease is deleted (only if still ours): the new owner
 *   takes it at its next cycle. A replica killed without releasing: its
 *   membership and its leases lapse after the lease time, and the others take
 *   over at their next cycle: within the lease time plus one cycle.
 * - Each token's last reported state (the watcher's SavedState, opaque here)
 *   is kept in Redis with a revision. commit() writes it only while no other
 *   replica holds the lease and the revision is the one we loaded
 *   (compare-and-set in Lua), exactly once (one commit id for all retries).
 *   The caller commits, then emits what was committed whatever happened to
 *   the lease: the commit is the point of truth a new owner resumes from.
 */
import { randomBytes } from 'node:crypto';
import { debuglog } from 'node:util';
import { ChargingError } from '../errors';
import { monotonicNow } from '../clock';
import { FailureReporter } from './connection';
import type { ScopeKeys } from './keys';
import { Rendezvous } from './rendezvous';
import { COMMIT_STATE, HEARTBEAT, LEASES, RESTORE_STATES, WATCH_LIST } from './scripts';
import { parseSaved } from './saved-state';
import { DataLossWatch } from './data-loss';
import type { AcquiredToken, CommitResult, OwnershipChange, OwnershipOptions, ReleaseReason, ReleasedToken, ScopeContext } from './ownership-types';

/** NODE_DEBUG=charging-fleet (lines start with Date.now()): each lease gained or lost, each commit's answer and each restore, on stderr (the nemesis's evidence). */
const trace = debuglog('charging-fleet');

interface Held {
  /** monotonic ms until which this replica may poll the token */
  validUntil: number;
  rev: number;
  /** false from the lease's acquisition until the state is loaded and onChange told (DataLossWatch may hold it back): not polled meanwhile */
  announced: boolean;
  /** commits of one token run one after the other (each expects the revision the last one wrote) */
  chain: Promise<unknown>;
  /** a commit whose answer never came: its id, reused by the next commit from the same revision */
  unresolved: { rev: number; id: string } | null;
  /** commits queued or on their way: reload() leaves the token alone meanwhile (the answer may be its own commit) */
  pending: number;
}

/** Leases are taken and renewed in batches of this many keys: one short script each. */
const LEASE_BATCH = 500;

export class WatchOwnership<S> {
  private readonly held = new Map<string, Held>();
  private readonly loss: DataLossWatch;
  private list = new Set<string>();
  private version: string | null = null;
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
    readonly scope: string,
    private readonly ctx: ScopeContext,
    private readonly keys: ScopeKeys,
    private readonly options: OwnershipOptions<S> = {},
  ) {
    this.now = ctx.now ?? monotonicNow;
    this.failures = new FailureReporter(ctx.connection, options.onError);
    this.validMs = ctx.leaseMs - Math.max(50, Math.min(1000, ctx.leaseMs / 10));
    this.commitRetryMs = Math.max(2 * ctx.leaseMs, 10_000);
    this.loss = new DataLossWatch(ctx.cycleMs, this.now);
  }

  /** May this replica poll the token now? Synchronous: ask it before every poll. */
  mayPoll(token: string): boolean {
    const h = this.held.get(token);
    return !this.closed && h !== undefined && h.announced && this.now() < h.validUntil;
  }

  /**
   * Gives this replica's share to the others (true: it cannot reach the
   * service) or takes it back (false), from the next cycle on.
   */
  standDown(on: boolean): void {
    if (this.standingDown === on) return;
    this.standingDown = on;
    this.ctx.kick();
  }

  /** The tokens this replica owns now. */
  owned(): string[] {
    return [...this.held.keys()].filter((t) => this.mayPoll(t));
  }

  /** The live replicas of this scope at the last cycle (sorted). */
  replicas(): string[] {
    return [...this.live];
  }

  /** The fleet's watch list as last read. */
  watched(): string[] {
    return [...this.list];
  }

  /** Adds tokens to the fleet's watch list (idempotent: every replica may add the same ones). */
  async watch(tokens: Iterable<string>): Promise<void> {
    await this.changeList('+', [...tokens]);
  }

  /** Removes tokens from the fleet's watch list, and their states. */
  async unwatch(tokens: Iterable<string>): Promise<void> {
    await this.changeList('-', [...tokens]);
  }

  /**
   * Keeps a token's new state, only while no other replica holds its lease
   * and nobody wrote since (see the file comment). Emit the events only when the
   * result is ok; otherwise keep the previous state and decide again at the
   * next poll. Never throws.
   */
  commit(token: string, state: S | null): Promise<CommitResult> {
    const h = this.held.get(token);
    // The lease as Redis holds it decides (COMMIT_STATE), not its local validity: a poll answered just before this
    // process stood still past that validity is still committed while no other replica could take the lease.
    if (!h || !h.announced || this.closed) return Promise.resolve({ ok: false, reason: 'not-owner', message: `${token} is not owned by this replica` });
    h.pending++;
    const next = h.chain.then(() => this.commitNow(token, h, state)).finally(() => h.pending--);
    h.chain = next.catch(() => undefined);
    return next;
  }

  /** One cycle: membership, watch list, leases. Run by the fleet's loop; never throws. */
  cycle(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.running ??= this.runCycle().finally(() => (this.running = null));
    return this.running;
  }

  /** Stops polling everything, gives the leases back and leaves the scope, so that others take over at once. */
  async close(): Promise<void> {
    if (this.closed) return;
    const tokens = new Set(this.held.keys());
    this.drop([...tokens], 'closed', 'the watch was closed');
    this.closed = true;
    // A cycle on its way may still take leases: let it end (bounded by the command timeout), then give back all.
    await this.running?.catch(() => undefined);
    for (const t of this.held.keys()) tokens.add(t);
    this.held.clear();
    try {
      const all = [...tokens];
      for (let i = 0; i < all.length; i += LEASE_BATCH) {
        const batch = all.slice(i, i + LEASE_BATCH);
        await this.ctx.connection.eval(LEASES, batch.map((t) => this.keys.lease(t)), [this.ctx.replicaId, this.ctx.leaseMs, 0]);
      }
      await this.ctx.connection.eval(HEARTBEAT, [this.keys.members, this.keys.members], [this.ctx.replicaId, this.ctx.leaseMs, '', '1']);
    } catch {
      // Redis away or already closed: the leases lapse by themselves
    }
  }

  private async changeList(op: '+' | '-', tokens: string[]): Promise<void> {
    if (this.closed) throw new ChargingError('CLOSED', 'The watch was closed');
    if (tokens.length === 0) return;
    const keys = [this.keys.list, this.keys.version, this.keys.state];
    for (let i = 0; i < tokens.length; i += LEASE_BATCH) await this.ctx.connection.eval(WATCH_LIST, keys, [op, ...tokens.slice(i, i + LEASE_BATCH)]);
    for (const t of tokens) {
      if (op === '+') this.list.add(t);
      else this.list.delete(t);
    }
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
      if (!this.closed) this.failures.failed(err, `watch ${this.scope}`);
    }
  }

  /**
   * One commit, exactly once: a commit id of its own, the same on every
   * retry, so that a try applied whose answer was lost (a reconnect, a write
   * pause) is recognised by the script as done, never "stale". Whether the
   * lease is ours is Redis's to say; a lease nobody holds is accepted only
   * while this replica still holds the token by its own clock at that try.
   * An answer that does not come within the retry time leaves the id with the
   * token: the next commit from the same revision carries it.
   */
  private async commitNow(token: string, h: Held, state: S | null): Promise<CommitResult> {
    if (this.held.get(token) !== h || this.closed) return { ok: false, reason: 'not-owner', message: `${token} is no longer owned by this replica` };
    const from = h.rev;
    const id = h.unresolved?.rev === from ? h.unresolved.id : randomBytes(8).toString('hex');
    const args = [this.ctx.replicaId, token, from, state === null ? '' : JSON.stringify(state), id];
    const deadline = this.now() + this.commitRetryMs;
    let res: unknown;
    let sent = false;
    for (let pause = 50; ; pause = Math.min(400, pause * 2)) {
      try {
        const stillHeld = this.held.get(token) === h && !this.closed && this.now() < h.validUntil;
        res = await this.ctx.connection.eval(COMMIT_STATE, [this.keys.lease(token), this.keys.state], [...args, stillHeld ? '1' : '0']);
        break;
      } catch (err) {
        const error = this.ctx.connection.toError(err, 'keeping a state');
        const left = deadline - this.now();
        // Not connected at the first try: nothing went out, nothing to resolve.
        if (!sent && NOT_SENT.test(String((err as Error)?.message))) return { ok: false, reason: 'unavailable', message: error.message };
        sent = true;
        if (error.code === 'CLOSED' || this.closed || left <= 0) {
          h.unresolved = { rev: from, id };
          return { ok: false, reason: 'unavailable', message: error.message };
        }
        await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      }
    }
    h.unresolved = null;
    if (trace.enabled) trace('%d %s %s commit %s from %d (%s): %j', Date.now(), this.ctx.replicaId, this.scope, token, from, state === null ? 'no session' : 'session', res);
    if (typeof res === 'number' && res > 0) {
      h.rev = res;
      this.loss.remember(token, res, state);
      return { ok: true, rev: res };
    }
    const stale = Array.isArray(res);
    if (stale && Number((res as unknown[])[1]) === 0 && h.rev > 0) {
      // Redis holds no state for a token whose lease is ours: it lost its data. Ours is the best there is: written from nothing.
      h.rev = 0;
      return this.commitNow(token, h, state);
    }
    const message = stale ? `the state of ${token} was changed by another replica` : `the lease on ${token} is not this replica's`;
    if (this.held.get(token) === h) this.drop([token], 'lease-lost', `lease lost at ${new Date().toISOString()} (${message})`);
    return { ok: false, reason: stale ? 'stale' : 'not-owner', message };
  }

  /** Renews this replica's membership, reads the live members and, when it changed, the watch list; puts back what Redis lost. */
  private async heartbeat(): Promise<void> {
    // Standing down: out of the members, so that rendezvous gives this replica nothing (its leases go at this cycle).
    const leave = this.standingDown ? '1' : '0';
    const keys = [this.keys.members, this.keys.members, this.keys.version, this.keys.epoch, this.keys.lossMark, this.keys.restores];
    const res = (await this.ctx.connection.eval(HEARTBEAT, keys, [this.ctx.replicaId, this.ctx.leaseMs, '', leave, ...this.loss.heartbeatArgs(this.live)])) as unknown[];
    const version = typeof res[0] === 'string' ? res[0] : null;
    this.live = res.slice(4).filter((_, i) => i % 2 === 0).map(String).sort();
    this.loss.heard(res[1], res[2], version === null && this.list.size > 0, res[3]);
    if (this.loss.mustRestore) {
      // Redis lost its data (data-loss.ts): put back the list we knew, and the newest states we know: whoever
      // takes a token next resumes from them rather than from nothing (a lost ended).
      if (trace.enabled) trace('%d %s %s restores the list and its known states', Date.now(), this.ctx.replicaId, this.scope);
      await this.changeList('+', [...this.list]);
      // Only over an older state or none; a holder with an older one reloads when it sees the restore counted (reload).
      await this.ctx.connection.eval(RESTORE_STATES, [this.keys.state, this.keys.lossMark, this.keys.restores], [this.ctx.replicaId, ...this.loss.restoreArgs()]);
      this.loss.restored();
      return;
    }
    if (version !== this.version) {
      const members = await this.ctx.connection.run('reading the watch list', (r) => r.smembers(this.keys.list));
      this.list = new Set(members);
      this.version = version;
      this.loss.keepOnly(this.list);
    }
  }

  private async syncLeases(): Promise<void> {
    const hrw = new Rendezvous(this.live);
    const me = this.ctx.replicaId;
    const wanted = [...this.list].filter((t) => hrw.ownerOf(t) === me);
    const wantedSet = new Set(wanted);
    const leaving = [...this.held.keys()].filter((t) => !wantedSet.has(t));
    // Stop polling first, then give the lease back: never a moment with two pollers.
    for (const t of leaving) {
      const reason: ReleaseReason = this.list.has(t) ? 'rebalanced' : 'unwatched';
      this.drop([t], reason, reason === 'rebalanced' ? 'another replica owns it now' : 'it is no longer watched');
    }
    const all = [...wanted, ...leaving];
    for (let i = 0; i < all.length; i += LEASE_BATCH) {
      const batch = all.slice(i, i + LEASE_BATCH);
      const want = batch.filter((t) => wantedSet.has(t)).length;
      const sentAt = this.now();
      const res = (await this.ctx.connection.eval(LEASES, batch.map((t) => this.keys.lease(t)), [me, this.ctx.leaseMs, want])) as number[];
      // Recorded even when closed meanwhile: close() gives back every lease held, these included.
      for (let j = 0; j < want; j++) this.renewed(batch[j], res[j], sentAt + this.validMs);
    }
    // Taken now, and taken earlier but held back (data-loss.ts): announced once their states are known.
    const unannounced = [...this.held].filter(([, h]) => !h.announced).map(([t]) => t);
    if (unannounced.length > 0 && !this.closed) await this.announce(unannounced);
    if (this.loss.mustReload && !this.closed) await this.reload();
  }

  /** The outcome of one wanted lease: kept, newly held (not announced yet), or held by another replica. */
  private renewed(token: string, result: number, validUntil: number): void {
    const h = this.held.get(token);
    if (result === 0) {
      if (h) this.drop([token], 'lease-lost', `lease lost at ${new Date().toISOString()} (another replica holds it)`);
      return;
    }
    if (this.now() >= validUntil) return; // the answer came too late to poll on it
    if (h) h.validUntil = validUntil;
    else this.held.set(token, { validUntil, rev: 0, announced: false, chain: Promise.resolve(), unresolved: null, pending: 0 });
  }

  /**
   * Loads the states of newly held tokens and tells the caller. While a loss
   * of Redis's data is marked, a token Redis holds no state for stays held
   * back: its last holder may still put it back (data-loss.ts).
   */
  private async announce(tokens: string[]): Promise<void> {
    let raw: Array<string | null>;
    try {
      raw = await this.ctx.connection.run('loading states', (r) => r.hmget(this.keys.state, ...tokens));
    } catch (err) {
      // Without the states we must not poll: give the leases up locally; the next cycle tries again.
      for (const t of tokens) this.held.delete(t);
      throw err;
    }
    if (this.closed) return;
    const acquired: AcquiredToken<S>[] = [];
    const holdBack = this.loss.holdingBack;
    tokens.forEach((token, i) => {
      const h = this.held.get(token);
      if (!h || h.announced) return;
      const saved = parseSaved<S>(raw[i]);
      if (!saved && holdBack) return;
      h.rev = saved?.rev ?? 0;
      h.announced = true;
      if (saved) this.loss.remember(token, saved.rev, saved.state);
      acquired.push({ token, saved });
    });
    if (acquired.length > 0) this.tell({ acquired, released: [] });
  }

  /** A replica put states back (data-loss.ts): a token held with an older state than Redis's now resumes from Redis's. */
  private async reload(): Promise<void> {
    const announced = [...this.held].filter(([, h]) => h.announced);
    const tokens = announced.filter(([, h]) => h.pending === 0).map(([t]) => t);
    const raw = tokens.length === 0 ? [] : await this.ctx.connection.run('loading states', (r) => r.hmget(this.keys.state, ...tokens));
    if (tokens.length === announced.length) this.loss.reloaded(); // else again at the next cycle, once their commits are answered
    const newer: AcquiredToken<S>[] = [];
    tokens.forEach((token, i) => {
      const h = this.held.get(token);
      const saved = parseSaved<S>(raw[i]);
      if (!h?.announced || h.pending > 0 || !saved || saved.rev <= h.rev) return;
      h.rev = saved.rev;
      this.loss.remember(token, saved.rev, saved.state);
      newer.push({ token, saved });
    });
    if (newer.length > 0 && !this.closed) this.tell({ acquired: newer, released: newer.map(({ token }) => ({ token, reason: 'restored', message: 'a newer state was put back after Redis lost its data' })) });
  }

  /** Local leases past their validity: stop polling them and say when they were lost. */
  private expireLapsed(): void {
    const now = this.now();
    const lapsed: ReleasedToken[] = [];
    for (const [token, h] of this.held) {
      if (now < h.validUntil) continue;
      this.held.delete(token);
      const at = new Date(Date.now() - (now - h.validUntil)).toISOString();
      lapsed.push({ token, reason: 'lease-lost', message: `lease lost at ${at} (not renewed in time: ${this.ctx.connection.health.reason ?? 'Redis answered too late'})` });
    }
    if (lapsed.length > 0) this.tell({ acquired: [], released: lapsed });
  }

  private drop(tokens: string[], reason: ReleaseReason, message: string): void {
    const released: ReleasedToken[] = [];
    for (const token of tokens) if (this.held.delete(token)) released.push({ token, reason, message });
    if (released.length > 0) this.tell({ acquired: [], released });
  }

  private tell(change: OwnershipChange<S>): void {
    if (trace.enabled) {
      const acquired = change.acquired.map((a) => `${a.token}@${a.saved ? `${a.saved.rev}${a.saved.state === null ? '/none' : ''}` : 'nothing'}`);
      trace('%d %s %s acquired [%s] released [%s]', Date.now(), this.ctx.replicaId, this.scope, acquired.join(' '), change.released.map((r) => `${r.token}:${r.reason}`).join(' '));
    }
    try {
      this.options.onChange?.(change);
    } catch (err) {
      if (!this.closed) this.failures.failed(new ChargingError('INTERNAL', `Ownership change of watch ${this.scope}: ${(err as Error)?.message ?? String(err)}`), 'watch');
    }
  }
}

/** ioredis's words for a command refused before it was written (no offline queue, not connected). */
const NOT_SENT = /Stream isn't writeable|enableOfflineQueue/;
