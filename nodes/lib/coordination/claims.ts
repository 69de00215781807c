/**
 * Claims: a piece of work done once per key by the whole fleet, its outcome
 * published for the replicas that asked for the same key (docs/fleet.md,
 * "Claims"). A START or STOP is one (its key: the command's fields); so is a
 * ledger record (its key: the record and its revision).
 *
 * Alone (LocalClaims) the work runs at once: there is nobody to share it
 * with. With Redis the first replica whose claim lands runs it; the others
 * get its outcome, or `unknown` when none came in time. Redis away: the work
 * runs here without a claim, after `unshared` was told why; the result says
 * so (`shared: false`), so a caller never asks which coordination it has.
 */
import type { ChargingError } from '../errors';

/** A piece of work's outcome as its runner published it: the result, or the error as ChargingError.toJSON wrote it. */
export type ClaimOutcome<T> = { ok: true; result: T } | { ok: false; error: Record<string, unknown> };

/** How a claim behaves; the caller's rules, not the fleet's. */
export interface ClaimPolicy {
  /** the longest the work may take: the claim outlives it, and the others wait as long for its outcome */
  workMs: number;
  /**
   * A claim whose claimer left the fleet without an outcome: 'never' taken
   * over (it lapses after workMs: a START sent twice is worse than late), or
   * taken over by the first replica that asks once the claimer is surely gone
   * (a STOP: twice is harmless, never is not).
   */
  takeOver: 'never' | 'when-claimer-gone';
  /** how long the outcome answers the same key after it (later: a new claim); default the fleet's (2 s) */
  windowMs?: number;
}

/** What a claim came to: run here, run by another replica (its outcome), or not known. */
export type ClaimRun<T> =
  /** run here; `shared` false when no claim could be taken (Redis away, or alone); `by`: this replica, when replicas share the work */
  | { role: 'ran'; shared: boolean; result: T; by?: string }
  | { role: 'duplicate'; from: string; outcome: ClaimOutcome<T> }
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string };

export interface Claims {
  /**
   * Runs `work` here, or passes on the outcome of the replica that claimed
   * the same key. `key`: the parts that name the work (a command's action,
   * token, location and connector; hashed before they reach Redis).
   * `unshared`: told when the work runs without a claim because Redis cannot
   * be asked (never when alone). Throws what `work` throws.
   */
  run<T>(key: readonly string[], work: () => Promise<T>, policy: ClaimPolicy, unshared: (err: ChargingError) => void): Promise<ClaimRun<T>>;
}

/** A process alone: the work runs at once. */
export const localClaims: Claims = {
  async run<T>(_key: readonly string[], work: () => Promise<T>): Promise<ClaimRun<T>> {
    return { role: 'ran', shared: false, result: await work() };
  },
};
