/**
 * The charging power of a watched session, estimated from its meter readings.
 * Pure: the readings kept so far go in, the readings to keep come out.
 */

/** The power estimate spans at least this much of the record clock once it has seen it. */
export const POWER_WINDOW_MS = 10_000;

/**
 * Meter readings for the estimate, flat: [at, kWh, at, kWh, …], oldest first.
 * Never changed once made: a reading adds a new list.
 */
export type PowerSamples = readonly number[];

export interface MeterReading {
  /** when it was read, in wall-clock ms: the record's own timestamp when `ownClock`, else the time of the poll */
  at: number;
  /** the record carries its own timestamp (so the same reading polled twice is recognised by it) */
  ownClock: boolean;
  /** the energy charged so far, from the raw meter values (the rounded energyKWh would skew short intervals) */
  kwh: number;
}

export interface PowerEstimate {
  /** the readings to keep for the next estimate */
  samples: PowerSamples | null;
  /** kW, rounded to 10 W; null when nothing can be said */
  kw: number | null;
}

/**
 * kW over the last POWER_WINDOW_MS or a little more (by the record's own
 * clock when it has one), not between two successive readings: meters count
 * whole Wh, so at 11 kW a one-second poll sees 3 or 4 Wh and reads 11 kW as
 * 14.4 kW. Over at least ten seconds that error is within 3 %. Until that
 * much has been seen, the estimate is over what there is. `lastKW` is the
 * estimate so far, kept while a reading says nothing new.
 */
export function estimatePower(samples: PowerSamples | null, lastKW: number | null, reading: MeterReading): PowerEstimate {
  const { at, kwh, ownClock } = reading;
  if (!samples) return { samples: [at, kwh], kw: lastKW };
  const lastAt = samples[samples.length - 2];
  const lastKWh = samples[samples.length - 1];
  // The same record polled again (or, without a record clock, the same reading): nothing new to estimate from.
  if (at <= lastAt || (!ownClock && kwh === lastKWh)) return { samples, kw: lastKW };
  // The meter went back: start again from here.
  if (kwh < lastKWh) return { samples: [at, kwh], kw: null };
  const all = [...samples, at, kwh];
  // Drop the oldest reading while the next one still spans the window.
  let from = 0;
  while (all.length - from > 4 && at - all[from + 2] >= POWER_WINDOW_MS) from += 2;
  const kept = from > 0 ? all.slice(from) : all;
  const kw = (kwh - kept[1]) / ((at - kept[0]) / 3_600_000);
  return { samples: kept, kw: kw >= 0 && Number.isFinite(kw) ? Math.round(kw * 100) / 100 : null };
}
