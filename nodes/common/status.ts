/**
 * The one status helper: the vocabulary every node uses for its badge, and a
 * board per node that coalesces updates. Under load a node may change state
 * thousands of times a second; Node-RED queues every update for every editor
 * connection, so the board shows at most one update per STATUS_GAP_MS,
 * always the latest, and the last state of a burst is never lost.
 */
import type { Node } from 'node-red';
import { ChargingError, isChargingError } from '../lib/errors';

/** Node-RED's status object. `stamp` asks for the time of the change to be appended when shown. */
export interface NodeStatus {
  fill?: 'red' | 'green' | 'yellow' | 'blue' | 'grey';
  shape?: 'ring' | 'dot';
  text?: string;
  stamp?: boolean;
}

/** At most this many ms between two updates of one node's badge (4 per second). */
export const STATUS_GAP_MS = 250;

export const Status = {
  requesting: (what: string): NodeStatus => ({ fill: 'blue', shape: 'dot', text: `${what}…` }),
  waiting: (what: string): NodeStatus => ({ fill: 'blue', shape: 'ring', text: what }),
  ok: (text: string): NodeStatus => ({ fill: 'green', shape: 'dot', text, stamp: true }),
  idle: (text: string): NodeStatus => ({ fill: 'grey', shape: 'ring', text, stamp: true }),
  warn: (text: string): NodeStatus => ({ fill: 'yellow', shape: 'ring', text }),
  error: (err: unknown): NodeStatus => ({ fill: 'red', shape: 'ring', text: `error: ${badgeReason(err)}` }),
};

/** A few words for a red badge, never a secret. */
export function badgeReason(err: unknown): string {
  if (!isChargingError(err)) return 'error';
  const e: ChargingError = err;
  switch (e.code) {
    case 'MISSING_FIELD':
      return `missing ${e.field ?? 'field'}`;
    case 'INVALID_INPUT':
      return `invalid ${e.field ?? 'input'}`;
    case 'HTTP':
      return `HTTP ${e.statusCode ?? ''}`.trim();
    case 'AUTH':
      return e.statusCode ? `auth failed (${e.statusCode})` : 'auth failed';
    case 'OUTCOME_UNKNOWN':
      return 'outcome unknown';
    case 'RATE_LIMITED':
      return 'rate limited';
    case 'TIMEOUT':
      return 'timeout';
    case 'NETWORK':
      return e.causeCode ? `network (${e.causeCode})` : 'network error';
    case 'BAD_RESPONSE':
      return 'bad response';
    case 'NOT_CONFIRMED':
      return 'not confirmed';
    case 'NO_SESSION':
      return 'no session';
    case 'CONFIG':
      return 'config error';
    case 'CLOSED':
      return 'closed';
    case 'INTERNAL':
      return 'internal error';
  }
}

/** Energy for a badge: Wh below 1 kWh (a 0.05 kWh threshold must not read "0.0 kWh"), else kWh. */
export function formatEnergy(kwh: number | null): string {
  if (kwh === null) return '';
  if (kwh < 1) return `${Math.round(kwh * 1000)} Wh`;
  return kwh >= 100 ? `${kwh.toFixed(0)} kWh` : `${kwh.toFixed(1)} kWh`;
}

function clock(now: Date): string {
  return now.toTimeString().slice(0, 8);
}

/** One node's badge, coalesced. */
export class StatusBoard {
  private lastShown = -Infinity;
  private pending: NodeStatus | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly node: Pick<Node, 'status'>,
    private readonly now: () => number = Date.now,
  ) {}

  set(status: NodeStatus): void {
    if (this.closed) return;
    const now = this.now();
    if (this.timer === null && now - this.lastShown >= STATUS_GAP_MS) {
      this.show(status, now);
      return;
    }
    // Too soon: keep only the latest, and show it when the gap has passed.
    this.pending = status;
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), STATUS_GAP_MS - (now - this.lastShown));
      this.timer.unref?.();
    }
  }

  /** Clears the badge and stops; nothing is shown afterwards. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
    this.node.status({});
  }

  private flush(): void {
    this.timer = null;
    const status = this.pending;
    this.pending = null;
    if (status && !this.closed) this.show(status, this.now());
  }

  private show(status: NodeStatus, now: number): void {
    this.lastShown = now;
    const { stamp, ...shown } = status;
    if (stamp && shown.text !== undefined) shown.text = `${shown.text} · ${clock(new Date(now))}`;
    this.node.status(shown);
  }
}
