/**
 * How a watch scope knows that Redis lost its data, and what it keeps to put
 * back (docs/fleet.md, "Leases and hand-over": Redis lost its data).
 *
 * Redis restarted without persistence, or a failover to a replica that had not
 * caught up, leaves the scope without its list, its leases and its states. The
 * replicas come back one by one: ioredis waits up to 2 s between two
 * reconnections, so the first one back may find every lease free and every
 * state gone, and take tokens whose last holder has not put their states back
 * yet. Polled from nothing, such a token's session that ended meanwhile is
 * never reported `ended`.
 *
 * - The epoch (SCOPE_HEARTBEAT, scope-members.ts): written once when the scope is empty. A replica
 *   that finds another one than it saw knows of the loss, even when others
 *   came back first and wrote the list again.
 * - The mark: the first replica back that saw the old epoch writes the
 *   members it saw before the loss; each takes itself out once it has put
 *   its states back, and the mark is gone when all have (about a reconnection
 *   after the loss), or after graceMs (the longest reconnection pause plus two
 *   cycles: a member that died with the data does not hold the others up
 *   longer). While it lives, a token taken with no state is held but not
 *   polled: its last holder may still be on its way back. It is announced
 *   with the state put back, or from nothing once the mark is gone.
 * - The states this replica knows, each with its revision: those it holds,
 *   and those it held or loaded before (a token handed over by a rebalance
 *   just before the loss, a lease that lapsed while Redis was away). On the
 *   loss every replica puts back what it knows, and a state is written only
 *   over an older revision: revisions of a token only grow, across holders
 *   and across losses (a state written from nothing starts at Redis's clock),
 *   so the newest state known anywhere wins, and nothing committed after the
 *   loss is ever overwritten.
 * - The restores counter: a replica started after the loss that is back first
 *   knows no epoch to compare, so it writes no mark, and a member may come
 *   back after the mark's longest life: either way a token may be taken from
 *   nothing before its state is put back. A holder that polls it and sees no
 *   session commits nothing, so no refused commit would tell it; every
 *   restore that wrote a state counts, and a holder that sees the count
 *   change reloads its tokens' states and resumes from any newer one.
 */
import { MAX_RECONNECT_PAUSE_MS } from '../redis/connection';
import { Script } from '../redis/script';
import { STATE_CODEC_LUA } from './state-codec';

/**
 * Redis lost its data: a replica puts back the states it knows, each at its
 * own revision and only over an older one (or none): the newest known
 * anywhere wins, and a state committed since the loss (its revision from
 * Redis's clock, above any older one) is never overwritten. Then it takes
 * itself out of the loss mark, and counts a restore that wrote anything: a
 * replica that took an item from nothing before it (no mark held the item
 * back) learns so at its next heartbeat. ARGV from REST_ARGS on: item,
 * revision, state JSON ('' = none) triples. Returns per item the revision
 * there afterwards.
 */
export const RESTORE_STATES = new Script({
  name: 'restoreStates',
  durable: true,
  keys: ['state', 'lossMark', 'restores'],
  args: ['replica'],
  lua: `${STATE_CODEC_LUA}
local out, wrote = {}, false
for i = REST_ARGS, #ARGV, 3 do
  local had = decodeState(redis.call('HGET', K.state, ARGV[i]))
  local rev = tonumber(ARGV[i + 1])
  if had < rev then
    redis.call('HSET', K.state, ARGV[i], encodeState(rev, '', ARGV[i + 2]))
    had = rev
    wrote = true
  end
  out[#out + 1] = had
end
redis.call('SREM', K.lossMark, A.replica)
if wrote then redis.call('INCR', K.restores) end
return out`,
});

export interface KnownState {
  rev: number;
  /** null: no session */
  state: unknown;
}

export class DataLossWatch {
  /** the epoch this replica last saw ('' before its first heartbeat) */
  private epoch = '';
  /** monotonic ms until which a token taken with no state waits */
  private markedUntil = -Infinity;
  /** the loss was seen and what this replica knows is not put back yet */
  private restorePending = false;
  /** "<epoch>/<restores counter>" as last seen (undefined before the first heartbeat) */
  private restoresSeen: string | undefined = undefined;
  /** a restore wrote states since this replica last loaded those of its tokens */
  private reloadPending = false;
  /** another server answers (a failover, a restart): the states known here are put back, the list is not */
  private statesPending = false;
  /** another primary answers on Sentinel: held items resume from Redis's state whenever it differs */
  private reloadAny = false;
  /** the newest state this replica knows per watched token */
  private readonly known = new Map<string, KnownState>();
  readonly graceMs: number;

  constructor(
    cycleMs: number,
    private readonly now: () => number,
  ) {
    this.graceMs = MAX_RECONNECT_PAUSE_MS + 2 * cycleMs;
  }

  /** What the scope's heartbeat needs for the loss: the epoch seen, the mark's longest life, the members seen before. */
  heartbeatArgs(): { epochSeen: string; markMs: number } {
    return { epochSeen: this.epoch, markMs: this.graceMs };
  }

  /**
   * What a heartbeat found. Redis lost its data since the last one when the
   * epoch is another, or the list's version is gone while a list was known:
   * then mustRestore until restored() is called.
   */
  heard(epoch: unknown, markLeftMs: unknown, versionGone: boolean, restores: unknown): void {
    const seen = typeof epoch === 'string' ? epoch : '';
    if ((this.epoch !== '' && seen !== this.epoch) || versionGone) this.restorePending = true;
    this.epoch = seen;
    // With the epoch: a counter started over after a loss may come back to the value seen before it.
    const count = `${seen}/${String(restores)}`;
    if (this.restoresSeen !== undefined && count !== this.restoresSeen) this.reloadPending = true;
    this.restoresSeen = count;
    const left = Number(markLeftMs);
    this.markedUntil = left > 0 ? this.now() + left : -Infinity;
  }

  /** The list and the known states are to be put back (asked again at every cycle until restored()). */
  get mustRestore(): boolean {
    return this.restorePending;
  }

  restored(): void {
    this.restorePending = false;
    this.statesPending = false;
  }

  /**
   * Another server answers than before (a failover, a restart): it may lack
   * the last writes the old one acknowledged. The epoch was replicated long
   * before, so it does not tell.
   *
   * - One server or a managed endpoint: every state in Redis was taken as
   *   done by its committer (its events told), so the states known here are
   *   put back (only over older ones: nothing newer is touched), as after a
   *   loss.
   * - Sentinel (`confirmed`: a commit counts only once replicated or
   *   confirmed, connection.ts): a state known here may have been loaded
   *   from a primary being replaced, written there by a commit that was
   *   never taken as done (its events not told). Put back, it would hide
   *   them for good (a `started` never emitted, then its `ended`). Instead
   *   every held item is loaded again and resumes from what the new primary
   *   holds whenever that differs from what it was held at.
   */
  serverChanged(confirmed: boolean): void {
    if (confirmed) {
      this.reloadPending = true;
      this.reloadAny = true;
    } else this.statesPending = true;
  }

  /** The reload follows a change of server on Sentinel: an item resumes from Redis's state whenever it differs, not only when newer. */
  get reloadsAny(): boolean {
    return this.reloadAny;
  }

  /** The known states are to be put back (not the list: its changes are durable writes). */
  get mustRestoreStates(): boolean {
    return this.statesPending;
  }

  /** Some replica put states back since this one last loaded its tokens' states: load them again (asked at every cycle until reloaded()). */
  get mustReload(): boolean {
    return this.reloadPending;
  }

  reloaded(): void {
    this.reloadPending = false;
    this.reloadAny = false;
  }

  /** A token taken with no state waits: the loss is marked and its last holder may still put its state back. */
  get holdingBack(): boolean {
    return this.now() < this.markedUntil;
  }

  /** The state Redis holds now, known from here on in place of any other (a held item resumed from it). */
  resumedFrom(token: string, rev: number, state: unknown): void {
    if (rev > 0 && state !== undefined) this.known.set(token, { rev, state });
  }

  /** A state committed or loaded: kept unless a newer one is known. */
  remember(token: string, rev: number, state: unknown): void {
    if (!(rev > 0) || state === undefined) return;
    const k = this.known.get(token);
    if (!k || k.rev <= rev) this.known.set(token, { rev, state });
  }

  /** Only watched tokens are kept. */
  keepOnly(watched: Set<string>): void {
    for (const t of this.known.keys()) if (!watched.has(t)) this.known.delete(t);
  }

  /** What to put back after a loss: RESTORE_STATES's item, revision, JSON triples. */
  restoreArgs(): string[] {
    return [...this.known].flatMap(([t, k]) => [t, String(k.rev), k.state === null ? '' : JSON.stringify(k.state)]);
  }
}
