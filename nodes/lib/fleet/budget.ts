/**
 * Max requests per second for the whole fleet (docs/fleet.md, "Request
 * budget"): the same rule as the local RequestBudget (client/request-budget.ts),
 * starts spaced evenly 1/rate apart so that any 1 s window holds at most
 * rate + 1 of them, kept in Redis and applied by one Lua script on Redis's
 * clock, so it holds however many replicas take from it and whatever their
 * clocks say.
 *
 * tryTake() answers `go` or how long to wait before asking again; it takes
 * nothing while waiting. The local RequestBudget stays in front of it (its
 * order of commands before polls, its 429 back-off: pass its current rate).
 * Redis unreachable: `unavailable`; the caller falls back to the local budget
 * at fallbackRate(), the limit shared among the replicas last seen alive.
 */
import type { ChargingError } from '../errors';
import type { FleetConnection } from './connection';
import type { FleetKeys } from './keys';
import { BUDGET_TAKE } from './scripts';

export type BudgetTake =
  /** start now; `atUs`: when, on Redis's clock (µs since the epoch) */
  | { kind: 'go'; atUs: number }
  /** the fleet's last start was too recent: ask again after waitMs */
  | { kind: 'wait'; waitMs: number }
  /** Redis could not be asked: use the local budget at fallbackRate() */
  | { kind: 'unavailable'; error: ChargingError };

export interface BudgetContext {
  connection: FleetConnection;
  keys: FleetKeys;
  /** how many replicas were alive at the last heartbeat */
  liveReplicas: () => number;
}

export class SharedRequestBudget {
  /** limit: requests per second for the fleet; 0 or not a positive number: no limit */
  constructor(
    private readonly ctx: BudgetContext,
    readonly limit: number,
  ) {}

  get enabled(): boolean {
    return this.limit > 0 && Number.isFinite(this.limit);
  }

  /**
   * One start, if the fleet's spacing allows it now. `rate`: the rate in use
   * (the local budget's, lower than the limit after a 429); never above the limit.
   */
  async tryTake(rate: number = this.limit): Promise<BudgetTake> {
    if (!this.enabled) return { kind: 'go', atUs: Date.now() * 1000 };
    const perSec = Math.min(this.limit, rate > 0 ? rate : this.limit);
    const spacingUs = Math.ceil(1_000_000 / perSec);
    // The key outlives a few spacings, so an idle fleet leaves nothing behind.
    const ttlMs = Math.max(2_000, Math.ceil((3 * spacingUs) / 1000));
    try {
      const [go, value] = (await this.ctx.connection.eval(BUDGET_TAKE, [this.ctx.keys.budget], [spacingUs, ttlMs])) as [number, number];
      return go === 1 ? { kind: 'go', atUs: value } : { kind: 'wait', waitMs: Math.max(1, Math.ceil(value / 1000)) };
    } catch (err) {
      return { kind: 'unavailable', error: this.ctx.connection.toError(err, 'request budget') };
    }
  }

  /** Requests per second this replica may use on its own while Redis is away. */
  fallbackRate(): number {
    if (!this.enabled) return 0;
    return this.limit / Math.max(1, this.ctx.liveReplicas());
  }
}
