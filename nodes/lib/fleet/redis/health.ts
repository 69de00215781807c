/**
 * Whether Redis answers, as one replica sees it (docs/fleet.md, "Failure
 * table"): up from the first `ready`, down when the connection drops or a
 * command gets no answer in time (a frozen Redis keeps its sockets open), up
 * again at the next command that succeeds. Listeners hear each change once
 * and can be removed; how long Redis has been down is kept here, on a
 * monotonic clock, so that a caller skips Redis at once during an outage (its
 * local fallback) instead of waiting out a command timeout per request.
 */
import { monotonicNow } from '../../clock';
import { ChargingError } from '../../errors';

export interface FleetHealth {
  up: boolean;
  /** why it is down, in words (redacted); null when up */
  reason: string | null;
  /** epoch ms of the change */
  at: number;
}

export type HealthListener = (health: FleetHealth) => void;

export class Health {
  private state: FleetHealth = { up: false, reason: 'not connected yet', at: Date.now() };
  private readonly listeners = new Set<HealthListener>();
  private downReported = false;
  /** monotonic ms since which Redis is known down; null while up or not tried yet */
  private downSince: number | null = null;

  constructor(
    /** how an outage is named when nothing better was said */
    private readonly where: string,
    private readonly now: () => number = monotonicNow,
  ) {}

  get current(): FleetHealth {
    return this.state;
  }

  /** Tells the listener about every change from now on; returns the way to stop. */
  listen(listener: HealthListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  up(): void {
    if (this.state.up) return;
    this.downReported = false;
    this.downSince = null;
    this.set({ up: true, reason: null, at: Date.now() });
  }

  /** Down once per outage: the first reason is told, the failures that follow it are not. */
  down(reason: string): void {
    if (this.downReported) return;
    this.downReported = true;
    this.downSince ??= this.now();
    this.set({ up: false, reason, at: Date.now() });
  }

  /** ms Redis has been known down; 0 while up or not tried yet */
  downForMs(): number {
    return this.downSince === null ? 0 : Math.max(0, this.now() - this.downSince);
  }

  get knownDown(): boolean {
    return this.downSince !== null;
  }

  /** Why Redis is skipped, as the failure it last gave. */
  error(): ChargingError {
    return new ChargingError('NETWORK', this.state.reason ?? `Coordinate replicas (Redis at ${this.where}): Redis is down`, { retryable: true });
  }

  /** No more listeners (the connection closed). */
  clear(): void {
    this.listeners.clear();
  }

  private set(next: FleetHealth): void {
    this.state = next;
    for (const l of [...this.listeners]) {
      try {
        l(next);
      } catch {
        // a listener's failure is its own; the connection goes on
      }
    }
  }
}

/**
 * Tells the failures of background work (the heartbeat, a scope's cycle) once
 * per streak of the same failure, and not at all while health is down: the
 * health change has said it already, and a cycle every 2 s must not become a
 * log line every 2 s.
 */
export class FailureReporter {
  private last: string | null = null;

  constructor(
    private readonly source: { toError(err: unknown, what: string): ChargingError; readonly isClosed: boolean; readonly health: FleetHealth },
    private readonly sink?: (err: ChargingError) => void,
  ) {}

  failed(err: unknown, what: string): void {
    const error = this.source.toError(err, what);
    if (error.code === 'CLOSED' || this.source.isClosed || !this.source.health.up || error.message === this.last) return;
    this.last = error.message;
    try {
      this.sink?.(error);
    } catch {
      // nothing left to tell
    }
  }

  succeeded(): void {
    this.last = null;
  }
}
