/**
 * A replica that reaches Redis but not the service (a bad key, blocked
 * egress) would keep its share of the watched tokens and poll them in vain.
 * After `failures` failed polls in a row it gives its share to the others
 * (WatchOwnership.standDown), unless no other replica is there to take it
 * (then polling in vain is still the best anyone can do: the service may be
 * down for everyone). Meanwhile it probes the service every probeMs, and
 * takes its share back at the first probe that gets through.
 */
import type { ChargingError } from '../errors';
import type { WatchOwnership } from './ownership';

export interface StandDownOptions {
  /** failed polls in a row before the share is given up (default 3) */
  failures?: number;
  /** pause between probes while standing down (default 5 s) */
  probeMs?: number;
  /** told once per stand-down and once when back */
  onChange?: (standingDown: boolean, reason: ChargingError | null) => void;
}

export class StandDown {
  private inARow = 0;
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private closed = false;
  private readonly failures: number;
  private readonly probeMs: number;

  constructor(
    private readonly own: Pick<WatchOwnership<unknown>, 'standDown' | 'replicas'>,
    private readonly replicaId: string,
    /** one request to the service that fails when this replica cannot reach it */
    private readonly probe: () => Promise<unknown>,
    private readonly options: StandDownOptions = {},
  ) {
    this.failures = options.failures ?? 3;
    this.probeMs = options.probeMs ?? 5_000;
  }

  get standingDown(): boolean {
    return this.timer !== null;
  }

  /** After every poll: its outcome (a failure that is the service's word on one token, such as a 404, is not a failure here). */
  polled(err: ChargingError | null): void {
    if (this.closed || this.standingDown) return;
    this.inARow = err ? this.inARow + 1 : 0;
    if (!err || this.inARow < this.failures) return;
    if (!this.own.replicas().some((r) => r !== this.replicaId)) return;
    this.own.standDown(true);
    this.timer = setInterval(() => void this.tryProbe(), this.probeMs);
    this.timer.unref?.();
    this.options.onChange?.(true, err);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async tryProbe(): Promise<void> {
    if (this.probing || this.closed) return;
    this.probing = true;
    try {
      await this.probe();
      if (this.closed || !this.timer) return;
      clearInterval(this.timer);
      this.timer = null;
      this.inARow = 0;
      this.own.standDown(false);
      this.options.onChange?.(false, null);
    } catch {
      // still unreachable: the next probe
    } finally {
      this.probing = false;
    }
  }
}
