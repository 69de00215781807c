/**
 * Tariffs and time of use: a tariff has a base price per kWh and windows
 * (days of the week, a local from-to, a price). A pair of meter readings is
 * split over the windows it spans in proportion to time; the energy of each
 * window is kept per window for the record's segments.
 */
import { ChargingError } from '../errors';
import { instantOf, localParts } from './zone';

export interface TariffWindow {
  /** days the window starts on: 0 = Sunday … 6 = Saturday */
  days: number[];
  /** minutes after local midnight; to <= from: the window runs past midnight */
  from: number;
  to: number;
  pricePerKWh: number;
  /** "22:00-06:00" */
  label: string;
}

export interface Tariff {
  id: string;
  currency: string;
  pricePerKWh: number;
  windows: TariffWindow[];
}

/** A window's energy so far (fractional Wh while a session runs). */
export interface WindowEnergy {
  /** the window's label, or "base" */
  window: string;
  pricePerKWh: number;
  wh: number;
}

const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

function invalid(message: string, field = 'tariffs'): ChargingError {
  return new ChargingError('INVALID_INPUT', message, { field });
}

function price(value: unknown, where: string): number {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) throw invalid(`${where}: pricePerKWh must be a number of 0 or more`);
  return n;
}

function minutes(value: unknown, where: string): number {
  const m = typeof value === 'string' ? /^(\d{1,2}):(\d{2})$/.exec(value) : null;
  const total = m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
  if (!m || Number(m[2]) > 59 || total > 24 * 60) throw invalid(`${where}: from and to are local times HH:MM (00:00-24:00)`);
  return total;
}

/** "mon-fri", "sat,sun", ["mon","tue"], or empty for every day. */
function days(value: unknown, where: string): number[] {
  if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) return [0, 1, 2, 3, 4, 5, 6];
  const parts = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : null;
  if (!parts) throw invalid(`${where}: days is a list such as "mon-fri" or ["sat","sun"]`);
  const out = new Set<number>();
  for (const raw of parts) {
    const [a, b] = String(raw).trim().toLowerCase().split('-');
    const from = DAY_NAMES.indexOf(a.slice(0, 3));
    const to = b === undefined ? from : DAY_NAMES.indexOf(b.slice(0, 3));
    if (from < 0 || to < 0) throw invalid(`${where}: unknown day in days (use mon, tue, wed, thu, fri, sat, sun)`);
    for (let d = from; ; d = (d + 1) % 7) {
      out.add(d);
      if (d === to) break;
    }
  }
  return [...out].sort();
}

const hhmm = (m: number): string => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;

/** The tariffs property or a `tariffs` command's payload, checked; ids unique. */
export function parseTariffs(value: unknown): Tariff[] {
  if (value === undefined || value === null || value === '') return [];
  if (!Array.isArray(value)) throw invalid('tariffs must be an array of {id, currency, pricePerKWh, windows}');
  const seen = new Set<string>();
  return value.map((t, i) => {
    if (!t || typeof t !== 'object') throw invalid(`tariff ${i + 1} must be an object`);
    const o = t as Record<string, unknown>;
    const id = typeof o.id === 'string' ? o.id.trim() : '';
    if (!id || seen.has(id)) throw invalid(`tariff ${i + 1}: id must be a text, unique among the tariffs`);
    seen.add(id);
    const currency = typeof o.currency === 'string' && /^[A-Za-z]{3}$/.test(o.currency.trim()) ? o.currency.trim().toUpperCase() : null;
    if (!currency) throw invalid(`tariff ${i + 1}: currency must be a three-letter code such as EUR`);
    const windows = o.windows === undefined ? [] : o.windows;
    if (!Array.isArray(windows)) throw invalid(`tariff ${i + 1}: windows must be an array`);
    return {
      id,
      currency,
      pricePerKWh: price(o.pricePerKWh, `tariff ${i + 1}`),
      windows: windows.map((w, j) => {
        const where = `tariff ${i + 1}, window ${j + 1}`;
        const wo = (w && typeof w === 'object' ? w : {}) as Record<string, unknown>;
        const from = minutes(wo.from, where);
        const to = minutes(wo.to, where);
        return { days: days(wo.days, where), from, to, pricePerKWh: price(wo.pricePerKWh, where), label: `${hhmm(from)}-${hhmm(to)}` };
      }),
    };
  });
}

/** The window that prices an instant (the first that matches), or null for the base price. */
export function windowAt(tariff: Tariff, ms: number, zone: string): TariffWindow | null {
  if (tariff.windows.length === 0) return null;
  const t = localParts(ms, zone);
  const mins = t.hour * 60 + t.minute + t.second / 60;
  const yesterday = (t.weekday + 6) % 7;
  for (const w of tariff.windows) {
    if (w.from < w.to) {
      if (w.days.includes(t.weekday) && mins >= w.from && mins < w.to) return w;
    } else if ((w.days.includes(t.weekday) && mins >= w.from) || (w.days.includes(yesterday) && mins < w.to)) {
      return w;
    }
  }
  return null;
}

/** Every instant in (fromMs, toMs) at which a window may begin or end, in order (a pair spans days at most). */
function boundaries(tariff: Tariff, fromMs: number, toMs: number, zone: string): number[] {
  const out = new Set<number>();
  const first = localParts(fromMs, zone);
  const edges = new Set<number>();
  for (const w of tariff.windows) {
    edges.add(w.from % 1440);
    edges.add(w.to % 1440);
  }
  for (let d = 0; d < MAX_DAYS; d++) {
    const date = new Date(Date.UTC(first.year, first.month - 1, first.day + d));
    const [y, m, day] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    if (instantOf(y, m, day, 0, 0, zone) >= toMs) break;
    for (const e of edges) {
      const at = instantOf(y, m, day, Math.floor(e / 60), e % 60, zone);
      if (at > fromMs && at < toMs) out.add(at);
    }
  }
  return [...out].sort((a, b) => a - b);
}

/** A pair of readings longer than this is split over its first MAX_DAYS days' windows only (no session lasts a year). */
const MAX_DAYS = 400;

/**
 * Adds the energy between two readings to `into`, split over the tariff's
 * windows in proportion to the time spent in each. No tariff: nothing.
 */
export function addPair(into: WindowEnergy[], tariff: Tariff | null, from: { ms: number; wh: number }, to: { ms: number; wh: number }, zone: string): void {
  if (!tariff) return;
  const wh = to.wh - from.wh;
  if (!(wh > 0)) return;
  const span = to.ms - from.ms;
  if (!(span > 0) || tariff.windows.length === 0) {
    // No time between them (or no windows): all of it at the price of the pair's end.
    add(into, windowAt(tariff, Math.max(from.ms, to.ms - 1), zone), tariff, wh);
    return;
  }
  const cuts = [from.ms, ...boundaries(tariff, from.ms, to.ms, zone), to.ms];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const share = (cuts[i + 1] - cuts[i]) / span;
    add(into, windowAt(tariff, cuts[i], zone), tariff, wh * share);
  }
}

function add(into: WindowEnergy[], w: TariffWindow | null, tariff: Tariff, wh: number): void {
  const window = w ? w.label : 'base';
  const pricePerKWh = w ? w.pricePerKWh : tariff.pricePerKWh;
  const kept = into.find((e) => e.window === window && e.pricePerKWh === pricePerKWh);
  if (kept) kept.wh += wh;
  else into.push({ window, pricePerKWh, wh });
}
