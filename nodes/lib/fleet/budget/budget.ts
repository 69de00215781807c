/**
 * Max requests per second for the whole fleet (docs/fleet.md, "Request
 * budget"): the same rule as the local RequestBudget (client/request-budget.ts),
 * starts spaced evenly 1/rate apart so that any 1 s window holds at most
 * rate + 1 of them, kept in Redis and applied by one Lua script on Redis's
 * clock, so it holds however many replicas take from it and whatever their
 * clocks say.
 *
 * take(maxWaitMs) reserves the fleet's next free start for this caller when
 * it is at most maxWaitMs away (first come, first served across replicas, so
 * none starves) and says how long to wait for it; tryTake() is take(0): go
 * now, or how long until a start is free (nothing reserved). A reservation
 * whose caller gives up is lost, which only lowers the rate. The local
 * RequestBudget stays in front (its order of commands before polls, its 429
 * back-off: pass its current rate). Redis unreachable, or known down (then
 * at once, without asking it): `unavailable`; the caller falls back to the local budget at fallbackRate(), the limit shared
 * among the replicas last seen alive.
 */
import type { ChargingError } from '../../errors';
import type { FleetConnection } from '../redis/connection';
import type { FleetKeys } from '../redis/keys';
import { Script } from '../redis/script';

/**
 * One start from the fleet's budget: starts are spaced at least `spacingUs`
 * apart on Redis's clock, so any 1 s window holds at most rate + 1 of them,
 * whatever the number of replicas. The next free start is reserved for the
 * caller if it is at most `maxWaitUs` away (first come, first served across
 * replicas: none of them starves). Returns {1, start µs, µs until it}
 * (reserved) or {0, µs until the next free start} (nothing reserved).
 */
export const BUDGET_TAKE = new Script({
  name: 'budgetTake',
  keys: ['budget'],
  args: ['spacingUs', 'keepMs', 'maxWaitUs'],
  clock: true,
  lua: `
local nowUs = redisTime()
local at = math.max(tonumber(redis.call('GET', K.budget) or '0'), nowUs)
if at - nowUs > tonumber(A.maxWaitUs) then return { 0, at - nowUs } end
redis.call('SET', K.budget, string.format('%.0f', at + tonumber(A.spacingUs)), 'PX', A.keepMs)
return { 1, at, at - nowUs }`,
});

export type BudgetTake =
  /** start after delayMs (0: now); `atUs`: the start reserved, on Redis's clock (µs since the epoch) */
  | { kind: 'go'; delayMs: number; atUs: number }
  /** no start free within the wait allowed: ask again after waitMs */
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

  /** A start now, or how long until one is free (see take). */
  tryTake(rate: number = this.limit): Promise<BudgetTake> {
    return this.take(0, rate);
  }

  /**
   * The fleet's next free start if it is at most maxWaitMs away, reserved for
   * this caller. `rate`: the rate in use (the local budget's, lower than the
   * limit after a 429); never above the limit. Never throws.
   */
  async take(maxWaitMs: number, rate: number = this.limit): Promise<BudgetTake> {
    if (!this.enabled) return { kind: 'go', delayMs: 0, atUs: Date.now() * 1000 };
    // Known down: the local budget at once, not a command timeout per request; the fleet's heartbeat probes meanwhile.
    const health = this.ctx.connection.healthState;
    if (health.knownDown) return { kind: 'unavailable', error: health.error() };
    const perSec = Math.min(this.limit, rate > 0 ? rate : this.limit);
    const spacingUs = Math.ceil(1_000_000 / perSec);
    const maxWaitUs = Math.max(0, Math.floor(maxWaitMs * 1000));
    // The key outlives the reservations and a few spacings, so an idle fleet leaves nothing behind.
    const ttlMs = Math.max(2_000, Math.ceil((3 * spacingUs + maxWaitUs) / 1000));
    try {
      const res = (await this.ctx.connection.eval(BUDGET_TAKE.call({ budget: this.ctx.keys.budget }, { spacingUs, keepMs: ttlMs, maxWaitUs }))) as number[];
      if (res[0] === 1) return { kind: 'go', atUs: res[1], delayMs: res[2] / 1000 };
      return { kind: 'wait', waitMs: Math.max(1, Math.ceil((res[1] - maxWaitUs) / 1000)) };
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
