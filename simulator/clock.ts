/**
 * A clock for the simulator placed at a chosen time (a session at 00:01 on
 * the 1st, across a change of daylight saving time) that then runs at real
 * speed, and can be moved on by hand: the service's times (createdAt, the
 * record's timestamp) and its meters follow it. Pass `now` to the simulator.
 */
export class SimClock {
  private base: number;
  private realStart: number;

  constructor(at: string | number = Date.now()) {
    this.base = typeof at === 'number' ? at : Date.parse(at);
    this.realStart = Date.now();
    if (!Number.isFinite(this.base)) throw new Error(`SimClock: not a time: ${String(at)}`);
  }

  /** The simulator's time now (ms since the epoch). */
  readonly now = (): number => this.base + (Date.now() - this.realStart);

  /** Placed at `at` (an ISO time with its zone, or ms); runs on from there. */
  set(at: string | number): void {
    this.base = typeof at === 'number' ? at : Date.parse(at);
    this.realStart = Date.now();
  }

  /** Moved on by `ms` at once (a meter running meanwhile has charged for that time). */
  advance(ms: number): void {
    this.base += ms;
  }
}
