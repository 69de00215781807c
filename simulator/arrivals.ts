/**
 * Every START and STOP counted at the door, whatever it was answered, so that
 * "0 duplicates" means the same message never arrived twice (issue 16, item 8).
 */
import type http from 'node:http';
import type { RecordedRequest, SimulatorCounters } from './types';

/** The identity of a command, for counting arrivals: START by token, locationId and evseId; STOP by transactionId. */
export function commandKey(cmd: Record<string, unknown>): { action: 'START' | 'STOP'; key: string } | null {
  if (cmd.action === 'START') return { action: 'START', key: `${String(cmd.token)}|${String(cmd.locationId)}|${String(cmd.evseId)}` };
  if (cmd.action === 'STOP') return { action: 'STOP', key: String(cmd.transactionId ?? `token:${String(cmd.token)}`) };
  return null;
}

interface Arrivals {
  all: number;
  /** arrivals not refused with 401 or 429 */
  taken: number;
  duplicates: number;
  /** what each arrival was answered, in order (0: no status line sent: reset, hang); the first 10 */
  answers: number[];
}

export class ArrivalBook {
  private readonly arrived = { START: new Map<string, Arrivals>(), STOP: new Map<string, Arrivals>() };

  constructor(private readonly counters: SimulatorCounters) {}

  all(action: 'START' | 'STOP', key: string): number {
    return this.arrived[action].get(key)?.all ?? 0;
  }

  duplicates(action: 'START' | 'STOP', key: string): number {
    return this.arrived[action].get(key)?.duplicates ?? 0;
  }

  answers(action: 'START' | 'STOP', key: string): readonly number[] {
    return this.arrived[action].get(key)?.answers ?? [];
  }

  clear(): void {
    this.arrived.START.clear();
    this.arrived.STOP.clear();
  }

  /**
   * Counts a command before any fault or check decides its answer. It counts as
   * taken (the station may act on it) unless its answer's status line says 401 or
   * 429: only then may the same message come again without being a duplicate.
   */
  count(rec: RecordedRequest, res: http.ServerResponse): void {
    let cmd: unknown;
    try {
      cmd = JSON.parse(rec.body);
    } catch {
      return;
    }
    const id = cmd && typeof cmd === 'object' ? commandKey(cmd as Record<string, unknown>) : null;
    if (!id) return;
    let entry = this.arrived[id.action].get(id.key);
    if (!entry) this.arrived[id.action].set(id.key, (entry = { all: 0, taken: 0, duplicates: 0, answers: [] }));
    const e = entry;
    e.all++;
    const duplicate = e.taken > 0;
    if (duplicate) e.duplicates++;
    e.taken++;
    const i = e.answers.length;
    if (i < 10) e.answers.push(0);
    let answered = false;
    const answer = () => {
      if (answered) return;
      answered = true;
      if (i < 10) e.answers[i] = res.statusCode;
      if (res.statusCode === 401 || res.statusCode === 429) e.taken--;
    };
    res.on('finish', answer);
    // A client acts on the status line: a 401 or 429 whose body was then cut (the 'cut' fault) was
    // still a refusal, and the client rightly sends the command again (counted as a duplicate before).
    res.on('close', () => {
      if (res.headersSent) answer();
    });
    if (id.action === 'START') {
      this.counters.startArrivals++;
      if (duplicate) this.counters.duplicateStartArrivals++;
    } else {
      this.counters.stopArrivals++;
      if (duplicate) this.counters.duplicateStopArrivals++;
    }
  }
}
