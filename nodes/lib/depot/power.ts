/**
 * What a session draws, as far as progress can tell: the service reports a
 * meter, not a power, so power is the energy between two readings at least
 * MEASURE_SPAN_MS apart, and nothing (the depot's assumedKW) before there are
 * two, or when the last reading is stale. The same readings say whether the
 * car still draws at all (idle: full, or not charging). Pure: the readings
 * are given, the clock is the caller's (monotonic ms).
 */

/** Two readings at least this far apart measure a power (a meter in Wh at 11 kW moves 30 Wh in 10 s: 3 % steps). */
export const MEASURE_SPAN_MS = 10_000;
/** Readings kept at most this close (checks every 2 s while a command is awaited), unless the trace's window asks for finer. */
const SPACING_MS = 5_000;

export interface Reading {
  /** monotonic ms */
  at: number;
  kWh: number;
}

export type PowerEstimate = { kW: number; source: 'measured' } | { kW: number; source: 'assumed' };

/** One session's meter readings, the newest last; a new transaction starts them again. */
export class EnergyTrace {
  private tx: string | null = null;
  private readings: Reading[] = [];

  private readonly spacingMs: number;

  constructor(
    /** readings older than this (behind the newest) are let go: the longest look back (the idle window) and a margin */
    private readonly keepMs: number,
    /** the shortest window it is asked about (the idle window): readings are kept at a tenth of it at most */
    windowMs = Infinity,
  ) {
    this.spacingMs = Math.min(SPACING_MS, Math.max(100, windowMs / 10));
  }

  /** A reading of the session `tx` (energy so far, kWh). */
  add(tx: string, at: number, kWh: number): void {
    if (tx !== this.tx) {
      this.tx = tx;
      this.readings = [];
    }
    const last = this.readings[this.readings.length - 1];
    // A meter that went back (a new session under the same transaction, a reset): start again.
    if (last && kWh < last.kWh) this.readings = [];
    // The newest always; the ones before it at least SPACING_MS apart.
    const prev = this.readings[this.readings.length - 2];
    if (prev && at - prev.at < this.spacingMs) this.readings[this.readings.length - 1] = { at, kWh };
    else this.readings.push({ at, kWh });
    const from = at - this.keepMs;
    let drop = 0;
    // Keep one reading at or before the window's start: the base the window is measured from.
    while (drop + 1 < this.readings.length && this.readings[drop + 1].at <= from) drop++;
    if (drop > 0) this.readings.splice(0, drop);
  }

  /** No session: the readings go. */
  clear(): void {
    this.tx = null;
    this.readings = [];
  }

  get transaction(): string | null {
    return this.tx;
  }

  /** The power now: measured from the newest reading and the newest one at least MEASURE_SPAN_MS before it, if the newest is at most staleMs old. */
  power(now: number, staleMs: number, assumedKW: number): PowerEstimate {
    const last = this.readings[this.readings.length - 1];
    if (!last || now - last.at > staleMs) return { kW: assumedKW, source: 'assumed' };
    for (let i = this.readings.length - 2; i >= 0; i--) {
      const r = this.readings[i];
      if (last.at - r.at >= MEASURE_SPAN_MS) return { kW: Math.max(0, ((last.kWh - r.kWh) * 3_600_000) / (last.at - r.at)), source: 'measured' };
    }
    return { kW: assumedKW, source: 'assumed' };
  }

  /** Energy drawn from the first reading kept to the newest, and over how long (null: fewer than two readings). */
  span(): { ms: number; kWh: number } | null {
    const first = this.readings[0];
    const last = this.readings[this.readings.length - 1];
    return first && last && last !== first ? { ms: last.at - first.at, kWh: Math.max(0, last.kWh - first.kWh) } : null;
  }

  /** Energy drawn over the last `windowMs` (from the newest reading at or before its start to the newest), or null before the readings span it. */
  drawn(windowMs: number): number | null {
    const last = this.readings[this.readings.length - 1];
    if (!last) return null;
    for (let i = this.readings.length - 1; i >= 0; i--) {
      const r = this.readings[i];
      if (last.at - r.at >= windowMs) return Math.max(0, last.kWh - r.kWh);
    }
    return null;
  }
}
