/**
 * Local time in an IANA zone on Node's own Intl (full ICU ships with Node):
 * the parts of an instant, its offset, an ISO string that carries the offset,
 * the local month of an instant, and the instant of a local wall time. One
 * formatter per zone, made once: formatting is what costs.
 */
import { ChargingError } from '../errors';

/** An instant's local wall time in a zone (month 1-12, weekday 0 = Sunday) and the zone's offset from UTC then. */
export interface LocalParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: number;
  offsetMin: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      weekday: 'short',
      era: 'short',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** The zone's canonical name, or CONFIG when Intl does not know it (an unknown zone is a configuration error). */
export function checkZone(zone: string): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw new ChargingError('CONFIG', `Unknown time zone "${String(zone).slice(0, 60)}": use an IANA name such as Europe/Berlin`, { field: 'timeZone' });
  }
}

/** The host's zone: the default when none is configured. */
export const hostZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

export function localParts(ms: number, zone: string): LocalParts {
  const p: Record<string, string> = {};
  for (const part of formatter(zone).formatToParts(ms)) p[part.type] = part.value;
  const year = p.era === 'BC' || p.era === 'B' ? 1 - Number(p.year) : Number(p.year);
  const wholeSec = Math.floor(ms / 1000) * 1000;
  const asUtc = Date.UTC(year, Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute), Number(p.second));
  return {
    year,
    month: Number(p.month),
    day: Number(p.day),
    hour: Number(p.hour),
    minute: Number(p.minute),
    second: Number(p.second),
    weekday: WEEKDAYS[p.weekday] ?? 0,
    offsetMin: Math.round((asUtc - wholeSec) / 60_000),
  };
}

const pad = (n: number, w = 2): string => String(Math.abs(n)).padStart(w, '0');

/** "+01:00", "-03:30", "+00:00". */
export function offsetText(offsetMin: number): string {
  return `${offsetMin < 0 ? '-' : '+'}${pad(Math.trunc(Math.abs(offsetMin) / 60))}:${pad(Math.abs(offsetMin) % 60)}`;
}

/** "2026-10-25T02:30:00+01:00": local wall time with its offset, so the repeated autumn hour is never ambiguous. */
export function localIso(ms: number, zone: string): { text: string; offset: string; parts: LocalParts } {
  const t = localParts(ms, zone);
  const offset = offsetText(t.offsetMin);
  const text = `${pad(t.year, 4)}-${pad(t.month)}-${pad(t.day)}T${pad(t.hour)}:${pad(t.minute)}:${pad(t.second)}${offset}`;
  return { text, offset, parts: t };
}

/** "2026-01": the local month of an instant. */
export function monthOf(ms: number, zone: string): string {
  const t = localParts(ms, zone);
  return monthKey(t.year, t.month);
}

export const monthKey = (year: number, month: number): string => `${pad(year, 4)}-${pad(month)}`;

/** "YYYY-MM" read as numbers, or null. */
export function parseMonth(text: unknown): { year: number; month: number } | null {
  if (typeof text !== 'string' || !/^\d{4}-\d{2}$/.test(text)) return null;
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  return month >= 1 && month <= 12 ? { year, month } : null;
}

/** The month after (delta 1) or before (-1) a month. */
export function addMonths(month: string, delta: number): string {
  const m = parseMonth(month);
  if (!m) throw new ChargingError('INVALID_INPUT', 'a month is written YYYY-MM', { field: 'month' });
  const i = m.year * 12 + (m.month - 1) + delta;
  return monthKey(Math.floor(i / 12), (i % 12) + 1);
}

/**
 * The instant of a local wall time. A time the spring change skips is moved
 * on by the gap (02:30 → 03:30 in Europe/Berlin); a time the autumn change
 * repeats is its first occurrence. Two passes of the offset are enough: zones
 * change their offset at most once within a day.
 */
export function instantOf(year: number, month: number, day: number, hour: number, minute: number, zone: string): number {
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  const first = wall - localParts(wall, zone).offsetMin * 60_000;
  const off1 = localParts(first, zone).offsetMin;
  const second = wall - off1 * 60_000;
  const off2 = localParts(second, zone).offsetMin;
  if (off1 === off2) {
    // The earlier of two readings (the autumn hour): an hour before may read the same wall time.
    const earlier = wall - localParts(second - 3_600_000, zone).offsetMin * 60_000;
    return earlier < second && localParts(earlier, zone).offsetMin * 60_000 === wall - earlier ? earlier : second;
  }
  // In the spring gap: the wall time does not exist; the instant that follows the gap.
  return Math.max(first, second);
}

/** A month as a half-open range of instants [from, to) in the zone. */
export function monthRange(month: string, zone: string): { fromMs: number; toMs: number } {
  const m = parseMonth(month);
  if (!m) throw new ChargingError('INVALID_INPUT', 'a month is written YYYY-MM', { field: 'month' });
  const next = parseMonth(addMonths(month, 1))!;
  return { fromMs: instantOf(m.year, m.month, 1, 0, 0, zone), toMs: instantOf(next.year, next.month, 1, 0, 0, zone) };
}
