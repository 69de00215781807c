/**
 * Money: each session's cost is rounded once, half away from zero, to the
 * currency's minor unit; a statement adds rounded sessions, so a column of
 * the CSV sums to the statement's total in any spreadsheet.
 */

/**
 * Rounds half away from zero at `decimals`. The value is first cut to 12
 * significant digits, so that 1.005 (stored as 1.00499999…) rounds as the
 * decimal it was written as.
 */
export function roundMoney(value: number, decimals: number): number {
  if (!Number.isFinite(value)) return value;
  const clean = Number(value.toPrecision(12));
  const scale = 10 ** decimals;
  const scaled = Number((Math.abs(clean) * scale).toPrecision(12));
  const rounded = Math.floor(scaled + 0.5) / scale;
  return clean < 0 ? -rounded : rounded;
}

/** Adds rounded amounts without float drift (0.1 + 0.2 stays 0.3). */
export function sumMoney(values: number[], decimals: number): number {
  const scale = 10 ** decimals;
  let units = 0;
  for (const v of values) units += Math.round(v * scale);
  return units / scale;
}

/** The minor unit's digits: 0-4, 2 when not a number. */
export function costDecimalsOf(value: unknown): number {
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 && n <= 4 ? n : 2;
}
