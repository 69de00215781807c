/**
 * Every session's life as an interval on the simulator's clock, from its
 * creation (the START accepted, or the driver at the station) until progress
 * shows it gone (its end plus stopDelayMs), so that "never more than N
 * sessions at once" is measured exactly at every moment, not sampled: the
 * peak is a sweep over the intervals.
 */
import type { Session } from './types';

interface Life {
  session: Session;
  from: number;
}

/** Lives kept at most (a month's soak at a depot keeps a few thousand). */
const KEEP = 200_000;

export class Occupancy {
  private readonly lives: Life[] = [];

  constructor(private readonly stopDelayMs: () => number) {}

  /** A session came into being at `at`. */
  begin(session: Session, at: number): void {
    this.lives.push({ session, from: at });
    if (this.lives.length > KEEP) this.lives.splice(0, this.lives.length - KEEP);
  }

  clear(): void {
    this.lives.length = 0;
  }

  /**
   * The most sessions that existed at the same moment, among those `which`
   * accepts (all by default). A session ends when progress stops showing it;
   * one that ends at the moment another begins does not overlap it.
   */
  peak(which: (s: Readonly<Session>) => boolean = () => true): number {
    const events: Array<[number, number]> = [];
    for (const l of this.lives) {
      if (!which(l.session)) continue;
      events.push([l.from, 1]);
      if (l.session.stoppedAt !== null) events.push([Math.max(l.from, l.session.stoppedAt + this.stopDelayMs()), -1]);
    }
    // Ends before beginnings at the same moment.
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let now = 0;
    let most = 0;
    for (const [, d] of events) {
      now += d;
      most = Math.max(most, now);
    }
    return most;
  }

  /** Sessions of `which` that exist at `at` (begun, and not yet gone from progress). */
  liveAt(at: number, which: (s: Readonly<Session>) => boolean = () => true): number {
    let n = 0;
    for (const l of this.lives) {
      if (!which(l.session) || l.from > at) continue;
      if (l.session.stoppedAt === null || l.session.stoppedAt + this.stopDelayMs() > at) n++;
    }
    return n;
  }

  /** Every session that began, oldest first (tests and the soak read them). */
  all(): readonly Readonly<Session>[] {
    return this.lives.map((l) => l.session);
  }
}
