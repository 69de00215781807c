/**
 * What charging-control remembers per target, in memory (monotonic times) and
 * as kept in a store across redeploys and restarts (wall-clock times: the
 * monotonic clock starts again with each process).
 */
import type { ControlTarget } from './view';

export type ControlState = 'idle' | 'queued' | 'starting' | 'charging' | 'stopping' | 'guard' | 'failed' | 'busy' | 'done';
export const CONTROL_STATES: readonly ControlState[] = ['idle', 'queued', 'starting', 'charging', 'stopping', 'guard', 'failed', 'busy', 'done'];
export type Action = 'START' | 'STOP';

export interface ControlSettings {
  /** least time between a STOP and the next START, and between a START and the next STOP, ms (0: off) */
  guardMs: number;
  /** a check every this many ms */
  checkMs: number;
  /** a check every this many ms while a command's effect is awaited (at most checkMs) */
  confirmMs: number;
  /** how long a START or STOP is given to show in progress before it counts as not done, ms */
  waitMs: number;
  /** STARTs in all before `failed` (1–5) */
  startAttempts: number;
  /** STOPs in one round before `failed` (a new round after checkMs: STOP is never given up while wanted off) */
  stopAttempts: number;
  /** stop a session started at the station while wanted off */
  enforce: boolean;
  /** after a round without a session (or a busy connector) one more round after this many ms; 0: never by itself */
  retryMs: number;
  /** a wish must hold this long before it acts, ms (0: at once) */
  onDelayMs: number;
  offDelayMs: number;
  /** stop when the session's energy reaches this, kWh (null: no limit; msg.energyLimit sets one per wish) */
  energyLimitKWh: number | null;
}

/** STARTs are bounded per this window: the retry interval, or this when the node never retries by itself. */
export const START_WINDOW_WITHOUT_RETRY_MS = 600_000;

export function startWindowMs(s: ControlSettings): number {
  return s.retryMs > 0 ? s.retryMs : START_WINDOW_WITHOUT_RETRY_MS;
}

export interface ControlMemory {
  /** the flow's wish; null only before the first */
  wanted: boolean | null;
  /** an off to carry out: the session there when it came, or one a START of ours still brings, is stopped */
  offPending: boolean;
  /** the off came with msg.force: its STOP does not wait for the guard */
  force: boolean;
  /** wanted on and the session ended without a STOP of ours: not started again until on after off, or msg.restart */
  endedAtStation: boolean;
  /** the START or STOP last sent (or that may have been sent) whose effect progress has not shown yet; at: monotonic ms */
  command: { action: Action; at: number; transactionId?: string } | null;
  /** the action of the current round, and how many of it were sent */
  round: Action | null;
  attempts: number;
  /** START attempts ran out, the service refused START (busy: 409), or a STOP round did not end the session; at: monotonic ms */
  failed: { action: Action; reason: string; at: number; busy?: boolean } | null;
  /** the connector is busy and that was reported (once per episode, until a session or an off) */
  busy: boolean;
  /** the STARTs sent lately (monotonic ms, the newest last): at most startAttempts per window */
  starts: number[];
  /** the last wish applied, as it came: a repeated identical one changes nothing */
  lastWish: string | null;
  /** a coordinated fleet's number of the last wish applied (0: none); kept so that a new holder never applies it again */
  wishSeq: number;
  /** a wish waiting for onDelay/offDelay: applied if it still holds at `since` + the delay (monotonic ms) */
  held: { wanted: boolean; since: number; force: boolean; restart: boolean; energyLimit?: number | null; priority?: number } | null;
  /** the energy limit in force for this wish, kWh (null: none) */
  limitKWh: number | null;
  /** the limit was reached in this session: stopped, and not started again until a new wish */
  done: { reason: string; transactionId: string; byDepot?: boolean } | null;
  /** the guard's clock: the last command this node sent; at: monotonic ms */
  last: { action: Action; at: number } | null;
  /** the transaction last seen active (an end without our STOP is an end at the station) */
  seenTx: string | null;
  /** state and wish last sent on the output ("state|wanted"): output only on a change */
  shown: string | null;
  /** the wish's msg.priority for a depot (null: the node's priority) */
  priority: number | null;
  /** the depot told this session to stop (a turn, a shed, a higher priority): stopped, then queued again while on is wanted */
  yielding: { transactionId: string; reason: string; kind: string } | null;
  /** energy of this wish's earlier sessions that the depot stopped, kWh: the energy limit counts the wish's total */
  wishKWh: number;
  /** energy of the current session last seen, kWh */
  seenKWh: number | null;
}

export function emptyMemory(): ControlMemory {
  return {
    wanted: null, offPending: false, force: false, endedAtStation: false, command: null, round: null, attempts: 0, failed: null, busy: false,
    starts: [], lastWish: null, wishSeq: 0, held: null, limitKWh: null, done: null, last: null, seenTx: null, shown: null,
    priority: null, yielding: null, wishKWh: 0, seenKWh: null,
  };
}

/** A target as a ControlStore keeps it: the memory with wall-clock times (ms since the epoch). */
export interface KeptTarget extends Omit<ControlMemory, 'command' | 'failed' | 'last' | 'starts' | 'held'> {
  v: 1;
  target: ControlTarget;
  command: { action: Action; atWall: number; transactionId?: string } | null;
  failed: { action: Action; reason: string; atWall: number; busy?: boolean } | null;
  last: { action: Action; atWall: number } | null;
  startsWall: number[];
  held: { wanted: boolean; sinceWall: number; force: boolean; restart: boolean; energyLimit?: number | null; priority?: number } | null;
}

export interface Clocks {
  /** monotonic ms */
  now: number;
  /** wall-clock ms */
  wall: number;
}

export function toKept(target: ControlTarget, m: ControlMemory, c: Clocks): KeptTarget {
  const wall = (at: number) => Math.round(c.wall - (c.now - at));
  const cmd = m.command;
  return {
    v: 1,
    target: { ...target },
    ...m,
    command: cmd && { action: cmd.action, atWall: wall(cmd.at), ...(cmd.transactionId ? { transactionId: cmd.transactionId } : {}) },
    failed: m.failed && { action: m.failed.action, reason: m.failed.reason, atWall: wall(m.failed.at), ...(m.failed.busy ? { busy: true } : {}) },
    last: m.last && { action: m.last.action, atWall: wall(m.last.at) },
    startsWall: m.starts.map(wall),
    held: m.held && { wanted: m.held.wanted, sinceWall: wall(m.held.since), force: m.held.force, restart: m.held.restart, ...(m.held.energyLimit !== undefined ? { energyLimit: m.held.energyLimit } : {}), ...(m.held.priority !== undefined ? { priority: m.held.priority } : {}) },
  };
}

const isAction = (v: unknown): v is Action => v === 'START' || v === 'STOP';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const finite = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/**
 * A kept target back in memory, or null if it is not one (a damaged store is
 * forgotten, not trusted). A time kept on a wall clock that has since gone
 * back counts as just now: a guard or a wait is never cut short by it.
 */
export function fromKept(raw: unknown, c: Clocks): { target: ControlTarget; memory: ControlMemory } | null {
  if (!isObject(raw) || raw.v !== 1 || !isObject(raw.target)) return null;
  const t = raw.target;
  const [locationId, evseId, token] = [text(t.locationId), text(t.evseId), text(t.token)];
  if (locationId === null || evseId === null || token === null || typeof raw.wanted !== 'boolean') return null;
  const mono = (atWall: unknown): number | null => {
    const w = finite(atWall);
    return w === null ? null : c.now - Math.max(0, c.wall - w);
  };
  const m = emptyMemory();
  m.wanted = raw.wanted;
  m.offPending = raw.offPending === true;
  m.force = raw.force === true;
  m.endedAtStation = raw.endedAtStation === true;
  m.seenTx = text(raw.seenTx);
  m.shown = text(raw.shown);
  m.round = isAction(raw.round) ? raw.round : null;
  m.attempts = m.round ? Math.max(0, Math.min(100, Math.floor(finite(raw.attempts) ?? 0))) : 0;
  const cmd = raw.command;
  const cmdAt = isObject(cmd) ? mono(cmd.atWall) : null;
  // A command kept without a time is taken as sent just now: waited for, never sent again blindly.
  if (isObject(cmd) && isAction(cmd.action)) m.command = { action: cmd.action, at: cmdAt ?? c.now, ...(text(cmd.transactionId) ? { transactionId: text(cmd.transactionId) as string } : {}) };
  const failed = raw.failed;
  if (isObject(failed) && isAction(failed.action)) m.failed = { action: failed.action, reason: text(failed.reason) ?? 'failed', at: mono(failed.atWall) ?? c.now, ...(failed.busy === true ? { busy: true } : {}) };
  m.busy = raw.busy === true;
  // A START kept without a time counts as just sent: the bound on STARTs is never loosened by a damaged entry.
  m.starts = Array.isArray(raw.startsWall) ? raw.startsWall.slice(-5).map((w) => mono(w) ?? c.now) : [];
  m.lastWish = text(raw.lastWish);
  m.wishSeq = Math.max(0, finite(raw.wishSeq) ?? 0);
  const held = raw.held;
  if (isObject(held) && typeof held.wanted === 'boolean') {
    const heldLimit = held.energyLimit === null ? null : finite(held.energyLimit) ?? undefined;
    const heldPriority = finite(held.priority);
    m.held = { wanted: held.wanted, since: mono(held.sinceWall) ?? c.now, force: held.force === true, restart: held.restart === true, ...(heldLimit !== undefined ? { energyLimit: heldLimit } : {}), ...(heldPriority !== null && Number.isInteger(heldPriority) ? { priority: heldPriority } : {}) };
  }
  const limit = finite(raw.limitKWh);
  m.limitKWh = limit !== null && limit > 0 ? limit : null;
  m.done = isObject(raw.done) ? { reason: text(raw.done.reason) ?? 'energy limit reached', transactionId: text(raw.done.transactionId) ?? '', ...(raw.done.byDepot === true ? { byDepot: true } : {}) } : null;
  const priority = finite(raw.priority);
  m.priority = priority !== null && Number.isInteger(priority) ? priority : null;
  const y = raw.yielding;
  m.yielding = isObject(y) && text(y.transactionId) ? { transactionId: text(y.transactionId) as string, reason: text(y.reason) ?? 'stopped by the depot', kind: text(y.kind) ?? 'turn' } : null;
  m.wishKWh = Math.max(0, finite(raw.wishKWh) ?? 0);
  m.seenKWh = finite(raw.seenKWh);
  const last = raw.last;
  if (isObject(last) && isAction(last.action)) m.last = { action: last.action, at: mono(last.atWall) ?? c.now };
  return { target: { locationId, evseId, token }, memory: m };
}
