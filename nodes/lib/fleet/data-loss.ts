/**
 * How a watch scope knows that Redis lost its data, and what it keeps to put
 * back (docs/fleet.md "Redis failover and data loss").
 *
 * Redis restarted without persistence, or a failover to a replica that had not
 * caught up, leaves the scope without its list, its leases and its states. The
 * replicas come back one by one: ioredis waits up to 2 s between two
 * reconnections, so the first one back may find every lease free and every
 * state gone, and take tokens whose last holder has not put their states back
 * yet. Polled from nothing, such a token's session that ended meanwhile is
 * never reported `ended`.
 *
 * - The epoch (HEARTBEAT): written once when the scope is empty. A replica
 *   that finds another one than it saw knows of the loss, even when others
 *   came back first and wrote the list again.
 * - The mark: every replica that sees the loss marks it for graceMs (the
 *   longest reconnection pause plus two cycles). While it lives, a token taken
 *   with no state is held but not polled: its last holder may still be on its
 *   way back. Each holder puts its states back as soon as it sees the loss
 *   (HSETNX: never over a newer one); the token is announced with that state,
 *   or from nothing once the mark is gone.
 * - The states this replica knows, each with its revision: those it holds,
 *   and those it held or loaded before (a token handed over by a rebalance
 *   just before the loss, a lease that lapsed while Redis was away). On the
 *   loss every replica puts back what it knows, and a state is written only
 *   over an older revision: revisions of a token only grow, across holders
 *   and across losses (a state written from nothing starts at Redis's clock),
 *   so the newest state known anywhere wins, and nothing committed after the
 *   loss is ever overwritten.
 */
import { MAX_RECONNECT_PAUSE_MS } from './connection';

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
  /** the newest state this replica knows per watched token */
  private readonly known = new Map<string, KnownState>();
  readonly graceMs: number;

  constructor(
    cycleMs: number,
    private readonly now: () => number,
  ) {
    this.graceMs = MAX_RECONNECT_PAUSE_MS + 2 * cycleMs;
  }

  /** HEARTBEAT's last two arguments: the epoch seen, and the mark's time. */
  heartbeatArgs(): [string, string] {
    return [this.epoch, String(this.graceMs)];
  }

  /**
   * What a heartbeat found: true when Redis lost its data since the last one
   * (another epoch, or the list's version gone while a list was known).
   */
  heard(epoch: unknown, markLeftMs: unknown, versionGone: boolean): boolean {
    const seen = typeof epoch === 'string' ? epoch : '';
    const lost = (this.epoch !== '' && seen !== this.epoch) || versionGone;
    this.epoch = seen;
    const left = Number(markLeftMs);
    this.markedUntil = left > 0 ? this.now() + left : -Infinity;
    return lost;
  }

  /** A token taken with no state waits: the loss is marked and its last holder may still put its state back. */
  get holdingBack(): boolean {
    return this.now() < this.markedUntil;
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

  /** What to put back after a loss: RESTORE_STATES's arguments, in the order of `tokens`. */
  restoreArgs(): { tokens: string[]; args: string[] } {
    const tokens = [...this.known.keys()];
    const args = tokens.flatMap((t) => {
      const k = this.known.get(t) as KnownState;
      return [t, String(k.rev), k.state === null ? '' : JSON.stringify(k.state)];
    });
    return { tokens, args };
  }
}
