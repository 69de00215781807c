/**
 * The depot's rules, as pure functions over the grants' table (GrantTable):
 * who yields for whom (a turn, a higher priority, a shed), when a car counts
 * as full, and the words and numbers a control node shows. No I/O, no clock
 * of their own: every replica that reads the same table at the same moment
 * comes to the same answer, so exactly the holders the rules pick stop.
 *
 * What the depot writes on an entry's note (GrantNote): `station` (a session
 * started at the station: counted, never stopped by the depot), `yielding`
 * (the holder was told to stop: a turn, shed, preempt or idle), `state` and
 * `kWSource` (for the status table).
 */
import type { GrantEntry, GrantTable } from '../coordination/grants';
import type { DepotSettings } from './settings';

export type YieldKind = 'turn' | 'shed' | 'preempt' | 'idle';

export interface Yield {
  kind: YieldKind;
  /** one line for msg.reason */
  reason: string;
}

/** The depot's numbers on a control node's output (msg.depot). */
export interface DepotView {
  /** 1-based place in the queue (null: not waiting) */
  position: number | null;
  waiting: number;
  inUse: number;
  limit: number | null;
  usedKW: number;
  budgetKW: number | null;
}

const managed = (e: GrantEntry): boolean => e.note.station !== true;
const yielding = (e: GrantEntry): boolean => typeof e.note.yielding === 'string' && e.note.yielding !== '';

/** A waiter's priority with aging: one level more for each agingMs it has waited (aging 0: its own). */
export function agedPriority(e: Pick<GrantEntry, 'priority' | 'askedAt'>, now: number, agingMs: number): number {
  return agingMs > 0 ? e.priority + Math.floor(Math.max(0, now - e.askedAt) / agingMs) : e.priority;
}

/** The first waiters that fit now (they are granted when they ask): the others are blocked. */
export function fittingWaiters(t: GrantTable): number {
  if ((t.limit !== null && t.inUse >= t.limit) || t.overSince !== null) return 0;
  let n = 0;
  let kw = t.usedKW;
  for (const w of t.head) {
    kw += w.weight;
    if ((t.limit !== null && t.inUse + n + 1 > t.limit) || (t.budgetKW !== null && kw > t.budgetKW + 1e-9)) break;
    n++;
  }
  return n;
}

/**
 * Whether the holder `key` must stop now, and why. Shed first (over the
 * limit for overFor: the managed holder past minRun with the lowest priority
 * and the latest start, one at a time); then, for each blocked waiter in
 * order not already served by a holder yielding: the lowest-priority holder
 * past minRun whose priority is below the waiter's own, else, with turns,
 * the longest-running holder past `turn` whose priority is not above the
 * waiter's aged one.
 * A station session never yields; a holder already yielding is not picked again.
 */
export function yieldFor(t: GrantTable, me: GrantEntry, s: DepotSettings): Yield | null {
  if (me.state !== 'granted' || !managed(me) || yielding(me)) return null;
  // Nobody waits and nothing is over: nothing to yield for (the usual check, at no cost).
  if (t.waiting === 0 && t.overSince === null) return null;
  const key = me.key;
  const now = t.now;
  const ran = (h: GrantEntry) => now - h.since;
  const lowFirst = (a: GrantEntry, b: GrantEntry) => a.priority - b.priority || b.since - a.since || (a.key < b.key ? -1 : 1);
  if (s.onOver === 'shed' && t.overSince !== null && now - t.overSince >= s.overForMs && !t.holders.some(yielding)) {
    const shed = t.holders.filter((h) => managed(h) && ran(h) >= s.minRunMs).sort(lowFirst)[0];
    return shed?.key === key ? { kind: 'shed', reason: 'over the limit: shed' } : null;
  }
  // Over the limit, a holder that goes makes no room for a waiter: that is the shed's work.
  if (t.overSince !== null) return null;
  const blocked = t.head.slice(fittingWaiters(t));
  if (blocked.length === 0) return null;
  const free = t.holders.filter((h) => managed(h) && !yielding(h));
  // Without turns, only a waiter of a higher priority than some holder can take a slot: most checks end here.
  if (s.turnMs <= 0 && !blocked.some((w) => free.some((h) => h.priority < w.priority))) return null;
  let served = t.holders.length - free.length - t.holders.filter((h) => !managed(h)).length;
  const picked = new Set<string>();
  const roomFor = (h: GrantEntry, w: GrantEntry) => t.budgetKW === null || t.usedKW - h.weight + w.weight <= t.budgetKW + 1e-9;
  for (const w of blocked) {
    if (served > 0) {
      served--;
      continue;
    }
    const p = agedPriority(w, now, t.agingMs);
    const candidates = free.filter((h) => !picked.has(h.key) && roomFor(h, w));
    // A higher priority takes a slot by its own priority; aging orders the queue (and turns), it does not stop a car.
    const pre = candidates.filter((h) => h.priority < w.priority && ran(h) >= s.minRunMs).sort(lowFirst)[0];
    const turn = pre ?? (s.turnMs > 0 ? candidates.filter((h) => h.priority <= p && ran(h) >= s.turnMs).sort((a, b) => a.since - b.since || (a.key < b.key ? -1 : 1))[0] : undefined);
    if (!turn) break; // a waiter behind this one has no higher claim
    if (turn.key === key) {
      return pre
        ? { kind: 'preempt', reason: `priority ${w.priority} is waiting: stopped after ${mmss(ran(me))}; ${t.waiting} waiting` }
        : { kind: 'turn', reason: `turn over after ${mmss(ran(me))}; ${t.waiting} waiting` };
    }
    picked.add(turn.key);
  }
  return null;
}

/** Less than idleKWh drawn over the idle window: the car is full or not drawing (idleKWh or idleWindow 0: never). */
export function idleFor(drawnKWh: number | null, s: DepotSettings): Yield | null {
  if (s.idleKWh <= 0 || s.idleWindowMs <= 0 || drawnKWh === null || drawnKWh >= s.idleKWh) return null;
  return { kind: 'idle', reason: `car full or not drawing: ${round2(drawnKWh)} kWh in ${mmss(s.idleWindowMs)}` };
}

/**
 * A holder the depot stops anyway (a turn, a shed, a higher priority) that
 * drew less than idleKWh per idleWindow over what was seen of its session
 * (at least min(idleWindow, 10 min) of it) is full rather than done with its
 * turn: it is let go as full, not queued again to charge nothing. Without
 * this a full car takes turns for ever when turns are no longer than the
 * idle window (its turn ends before the window is seen).
 */
export function fullAtStop(span: { ms: number; kWh: number } | null, s: DepotSettings): Yield | null {
  if (!span || s.idleKWh <= 0 || s.idleWindowMs <= 0 || span.ms < Math.min(s.idleWindowMs, 600_000)) return null;
  if (span.kWh >= (s.idleKWh * span.ms) / s.idleWindowMs) return null;
  return { kind: 'idle', reason: `car full or not drawing: ${round2(span.kWh)} kWh in ${mmss(span.ms)}` };
}

/** msg.depot from a table and a position. */
export function depotView(t: GrantTable, position: number): DepotView {
  return { position: position > 0 ? position : null, waiting: t.waiting, inUse: t.inUse, limit: t.limit, usedKW: round2(t.usedKW), budgetKW: t.budgetKW };
}

/** "waiting for a slot: 2 of 2 in use, 1st of 3" (with a budget: "…, 18.5 of 22 kW, …"). */
export function queueReason(t: GrantTable, position: number): string {
  const parts: string[] = [];
  if (t.limit !== null) parts.push(`${t.inUse} of ${t.limit} in use`);
  if (t.budgetKW !== null) parts.push(`${round2(t.usedKW)} of ${t.budgetKW} kW`);
  if (t.limit === null) parts.push(`${t.inUse} charging`);
  return `waiting for a slot: ${parts.join(', ')}${position > 0 ? `, ${ordinal(position)} of ${t.waiting}` : ''}`;
}

export function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] ?? 'th';
  return `${n}${suffix}`;
}

export function mmss(ms: number): string {
  const sec = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(sec / 60)}:${String(sec % 60).padStart(2, '0')}`;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
