/**
 * Money: each session's cost is rounded once, half away from zero, to the
 * currency's minor unit; a statement adds rounded sessions, so a column of
 * the CSV sums to the statement's total in any spreadsheet.
 */

/**
 * Rounds half away from zero at `decimals`. The value is first cut to the
 * significant digits it can be trusted with (12, more for large amounts, at
 * most the 15 a double holds), so that 1.005 (stored as 1.00499999…) rounds
 * as the decimal it was written as, and 12 345 678 901.125 keeps its cents.
 */
export function roundMoney(value: number, decimals: number): number {
  if (!Number.isFinite(value) || value === 0) return value;
  const digits = Math.min(15, Math.max(12, Math.floor(Math.log10(Math.abs(value))) + 1 + decimals + 3));
  const clean = Number(value.toPrecision(digits));
  const scale = 10 ** decimals;
  const scaled = Number((Math.abs(clean) * scale).toPrecision(digits));
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

/** The minor unit's digits: 0-4, 2 when not a number (an empty field is none: Number('') would be 0). */
export function costDecimalsOf(value: unknown): number {
  if (typeof value === 'string' && value.trim() === '') return 2;
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 && n <= 4 ? n : 2;
}
