/**
 * How long Redis has been known down, from the connection's health changes,
 * on a monotonic clock: what lets a caller skip Redis at once during an
 * outage (its local fallback) instead of waiting out a command timeout per
 * request. The fleet's loop keeps probing in the background (its heartbeat),
 * and the first answer marks Redis up again.
 */
import { monotonicNow } from '../clock';
import { ChargingError } from '../errors';
import type { FleetConnection } from './connection';

export class DownTimer {
  /** monotonic ms since which Redis is known down; null while up (or not tried yet) */
  private since: number | null = null;

  constructor(
    private readonly connection: FleetConnection,
    private readonly now: () => number = monotonicNow,
  ) {
    connection.onHealth((h) => (this.since = h.up ? null : (this.since ?? this.now())));
  }

  /** ms Redis has been known down; 0 while up or not tried yet */
  downForMs(): number {
    return this.since === null ? 0 : Math.max(0, this.now() - this.since);
  }

  get down(): boolean {
    return this.since !== null;
  }

  /** Why Redis is skipped, as the failure it last gave. */
  error(): ChargingError {
    return new ChargingError('NETWORK', this.connection.health.reason ?? `Coordinate replicas (Redis at ${this.connection.where}): Redis is down`, { retryable: true });
  }
}
