/**
 * A clock for charging-control's controller that moves only when told: its
 * timers fire in order as time is advanced, and every check the controller
 * starts is awaited (real HTTP to the simulator included) before time moves on.
 */
import type { ControlClock } from '../../../nodes/lib/control/controller';

export class FakeClock implements ControlClock {
  private t = 1_000_000;
  /** the wall clock at t, moved with it (or stepped by itself, as NTP does) */
  wallAtStart = Date.parse('2026-11-25T12:00:00Z');
  private readonly start = this.t;
  private timers: Array<{ at: number; fn: () => void; seq: number }> = [];
  private seq = 0;
  private readonly busy = new Set<Promise<unknown>>();

  now(): number {
    return this.t;
  }

  wall(): number {
    return this.wallAtStart + (this.t - this.start);
  }

  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + ms, fn, seq: this.seq++ };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((x) => x !== timer);
    };
  }

  /** The controller's track(): checks in progress. */
  track = (work: Promise<unknown>): void => {
    this.busy.add(work);
    void work.finally(() => this.busy.delete(work));
  };

  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Waits until no check is running. */
  async settle(): Promise<void> {
    for (let i = 0; i < 1000 && this.busy.size > 0; i++) await Promise.allSettled([...this.busy]);
  }

  /** Moves time on by ms, firing each timer due on the way at its own time, every check finished before the next. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await this.settle();
      const due = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((x) => x !== due);
      this.t = Math.max(this.t, due.at);
      due.fn();
    }
    this.t = end;
    await this.settle();
  }
}
