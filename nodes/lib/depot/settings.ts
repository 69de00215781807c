/**
 * A depot's settings (charging-depot's dialog) and the values a flow sends at
 * run time (msg.limit, msg.budgetKW, msg.priority): one reader each, a clear
 * error for anything else. Times in ms, power in kW, energy in kWh.
 */
import { ChargingError } from '../errors';
import { positiveNumber } from '../settings';

export interface DepotSettings {
  /** most connectors charging at once (null: no count limit) */
  limit: number | null;
  /** most estimated kW at once (null: none) */
  budgetKW: number | null;
  /** what a session counts before its power is measured, and when its reading is stale */
  assumedKW: number;
  /** least time a granted session keeps its slot before a turn, a shed or a higher priority may take it */
  minRunMs: number;
  /** with someone waiting at equal or higher priority, the longest-running holder yields after this (0: off) */
  turnMs: number;
  /** waiting this long raises a waiter's priority by 1 (0: strict priority) */
  agingMs: number;
  /** less energy than idleKWh over idleWindowMs: the car is full or not drawing (either 0: off) */
  idleKWh: number;
  idleWindowMs: number;
  /** a session on a known token started at the station counts */
  countStation: boolean;
  /** over the limit for overForMs: shed (stop managed holders, one per overForMs) or wait (grant nothing) */
  onOver: 'shed' | 'wait';
  overForMs: number;
}

/** The dialog's values as they come (strings from the editor, numbers from a flow written by hand). */
export interface DepotConfig {
  limit?: unknown;
  budgetKW?: unknown;
  assumedKW?: unknown;
  minRun?: unknown;
  turn?: unknown;
  aging?: unknown;
  idleKWh?: unknown;
  idleWindow?: unknown;
  countStation?: unknown;
  onOver?: unknown;
  overFor?: unknown;
}

export const MAX_LIMIT = 10_000;
export const MAX_KW = 100_000;
/** msg.priority's range: an integer within ±PRIORITY_RANGE */
export const PRIORITY_RANGE = 1000;

const empty = (v: unknown): boolean => v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
/** A number as typed: a decimal comma read as a point ("7,4", as the German dialog invites). */
const numberOf = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' ? Number(v.trim().replace(/^(-?\d+),(\d+)$/, '$1.$2')) : NaN);
const secs = (v: unknown, fallback: number, max = 7 * 86_400): number => positiveNumber(typeof v === 'string' ? v.replace(',', '.') : v, fallback, 0, max) * 1000;

/**
 * The settings of a charging-depot node; a depot without limit and budget,
 * or with a limit or budget it cannot read, is a CONFIG error (nothing is
 * started through it). Warnings: what was read differently from what was typed.
 */
export function depotSettings(config: DepotConfig): { settings: DepotSettings; warnings: string[] } {
  const warnings: string[] = [];
  const limit = readLimit(config.limit, 'CONFIG');
  const budgetKW = readBudget(config.budgetKW, 'CONFIG');
  if (limit === null && budgetKW === null) {
    throw new ChargingError('CONFIG', 'The depot has neither a limit of connectors nor a kW budget: set at least one (nothing is started through it until then)', { field: 'limit' });
  }
  const assumedKW = positiveNumber(numberOf(config.assumedKW), 11, 0.1, MAX_KW);
  if (budgetKW !== null && budgetKW < assumedKW) {
    throw new ChargingError('CONFIG', `The depot's kW budget (${budgetKW} kW) is below the power a session counts before it is measured (assumedKW ${assumedKW} kW): no car could ever start`, { field: 'budgetKW' });
  }
  const minRunMs = secs(config.minRun, 600);
  let turnMs = secs(config.turn, 0);
  if (turnMs > 0 && turnMs < minRunMs) {
    warnings.push(`The turn (${turnMs / 1000} s) is shorter than minRun (${minRunMs / 1000} s): turns come after ${minRunMs / 1000} s`);
    turnMs = minRunMs;
  }
  return {
    settings: {
      limit, budgetKW, assumedKW, minRunMs, turnMs,
      agingMs: secs(config.aging, 3600, 365 * 86_400),
      idleKWh: positiveNumber(numberOf(config.idleKWh), 0.1, 0, 1000),
      idleWindowMs: secs(config.idleWindow, 1800),
      countStation: config.countStation !== false && config.countStation !== 'false',
      onOver: config.onOver === 'wait' ? 'wait' : 'shed',
      overForMs: secs(config.overFor, 60),
    },
    warnings,
  };
}

/** The limit of connectors: a whole number from 1 (empty: none). */
function readLimit(v: unknown, code: 'CONFIG' | 'INVALID_INPUT'): number | null {
  if (empty(v)) return null;
  const n = numberOf(v);
  if (Number.isInteger(n) && n >= 1 && n <= MAX_LIMIT) return n;
  throw new ChargingError(code, `${code === 'CONFIG' ? 'The depot\'s limit' : 'msg.limit'} must be a whole number of connectors from 1 to ${MAX_LIMIT}${code === 'CONFIG' ? ', or empty' : ', or null for none'} (got ${describe(v)})`, { field: 'limit' });
}

/** The kW budget: a number above 0 (empty: none). */
function readBudget(v: unknown, code: 'CONFIG' | 'INVALID_INPUT'): number | null {
  if (empty(v)) return null;
  const n = numberOf(v);
  if (Number.isFinite(n) && n > 0 && n <= MAX_KW) return n;
  throw new ChargingError(code, `${code === 'CONFIG' ? 'The depot\'s kW budget' : 'msg.budgetKW'} must be a number of kW above 0 (up to ${MAX_KW})${code === 'CONFIG' ? ', or empty' : ', or null for none'} (got ${describe(v)})`, { field: 'budgetKW' });
}

/**
 * msg.limit / msg.budgetKW at run time: each absent keeps its value, null
 * (or an empty string) removes it. Anything else, or both gone, is
 * INVALID_INPUT and changes nothing. `assumedKW`: a budget below it could
 * never start a car.
 */
export function runTimeLimits(msg: { limit?: unknown; budgetKW?: unknown }, current: { limit: number | null; budgetKW: number | null }, assumedKW: number): { limit: number | null; budgetKW: number | null } | null {
  const has = (k: 'limit' | 'budgetKW') => Object.prototype.hasOwnProperty.call(msg, k) && msg[k] !== undefined;
  if (!has('limit') && !has('budgetKW')) return null;
  const limit = has('limit') ? readLimit(msg.limit, 'INVALID_INPUT') : current.limit;
  const budgetKW = has('budgetKW') ? readBudget(msg.budgetKW, 'INVALID_INPUT') : current.budgetKW;
  if (limit === null && budgetKW === null) throw new ChargingError('INVALID_INPUT', 'A depot needs a limit of connectors or a kW budget: msg.limit and msg.budgetKW cannot both be none', { field: 'limit' });
  if (budgetKW !== null && budgetKW < assumedKW) throw new ChargingError('INVALID_INPUT', `msg.budgetKW (${budgetKW} kW) is below the depot's assumedKW (${assumedKW} kW): no car could ever start`, { field: 'budgetKW' });
  return { limit, budgetKW };
}

/** msg.priority with a wish: an integer (or a string of one) within ±1000; undefined when the message has none. */
export function parsePriority(v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*[-+]?\d{1,4}\s*$/.test(v) ? Number(v) : NaN;
  if (Number.isInteger(n) && Math.abs(n) <= PRIORITY_RANGE) return n;
  throw new ChargingError('INVALID_INPUT', `msg.priority must be a whole number from -${PRIORITY_RANGE} to ${PRIORITY_RANGE} (got ${describe(v)})`, { field: 'priority' });
}

/** The node's priority setting: an integer, 0 when empty or unreadable. */
export function nodePriority(v: unknown): number {
  const n = numberOf(v);
  return Number.isInteger(n) ? Math.max(-PRIORITY_RANGE, Math.min(PRIORITY_RANGE, n)) : 0;
}

function describe(v: unknown): string {
  if (typeof v === 'string') return `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  if (typeof v === 'number') return String(v);
  if (v === null) return 'null';
  return Array.isArray(v) ? 'an array' : typeof v;
}
