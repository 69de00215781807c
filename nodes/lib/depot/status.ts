/**
 * A depot's table as charging-depot-status outputs it (msg.payload) and its
 * badge's numbers: every entry with its target, state, priority, since, kW
 * (measured or assumed) and place in the queue. Pure.
 */
import type { GrantEntry, GrantList } from '../coordination/grants';
import { targetOf, type ControlTarget } from '../control/view';

export interface DepotEntry {
  target: ControlTarget | null;
  /** charging, starting, stopping (a STOP of the depot or of the flow on its way), queued */
  state: string;
  priority: number;
  /** ISO time: granted or counted since, or waiting since */
  since: string;
  kW: number;
  kWSource: 'measured' | 'assumed';
  /** 1-based place in the queue (null: not waiting) */
  position: number | null;
  /** started at the station: counted, never stopped by the depot */
  station: boolean;
  /** told to stop by the depot: turn, shed, preempt, idle (null: not) */
  yielding: string | null;
}

export interface DepotStatus {
  limit: number | null;
  budgetKW: number | null;
  inUse: number;
  usedKW: number;
  waiting: number;
  entries: DepotEntry[];
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

function entryOf(e: GrantEntry, position: number | null): DepotEntry {
  const note = e.note;
  return {
    target: targetOf(e.key),
    state: position !== null ? 'queued' : typeof note.state === 'string' ? note.state : 'charging',
    priority: e.priority,
    since: new Date(position !== null ? e.askedAt : e.since).toISOString(),
    kW: round2(e.weight),
    kWSource: note.kWSource === 'measured' ? 'measured' : 'assumed',
    position,
    station: note.station === true,
    yielding: typeof note.yielding === 'string' && note.yielding !== '' ? note.yielding : null,
  };
}

export function depotStatus(list: Extract<GrantList, { ok: true }>): DepotStatus {
  const t = list.table;
  return {
    limit: t.limit,
    budgetKW: t.budgetKW,
    inUse: t.inUse,
    usedKW: round2(t.usedKW),
    waiting: t.waiting,
    entries: [...t.holders.map((e) => entryOf(e, null)), ...list.queue.map((e, i) => entryOf(e, i + 1))],
  };
}
