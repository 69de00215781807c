/**
 * A charging-control node's link to its depot: at each check of a target,
 * one operation on the depot's grants (hold while a session or a START on
 * its way counts, ask right before a START, release once nothing counts),
 * and the depot's word on it from the rules (rules.ts): granted or queued,
 * stop for a turn, a shed, a higher priority or a full car. The power each
 * session counts is estimated here from its meter readings (power.ts).
 */
import type { GrantAnswer, GrantPool } from '../coordination/grants';
import { EnergyTrace, MEASURE_SPAN_MS } from './power';
import { depotView, type DepotView, fullAtStop, idleFor, queueReason, type Yield, yieldFor } from './rules';
import type { DepotSettings } from './settings';

/** What a check found for a target that counts. */
export interface HoldFacts {
  /** the session's transaction (null: pending, or a START on its way) */
  transactionId: string | null;
  /** the session's energy so far, when progress gives it */
  energyKWh?: number;
  /** what the depot's table shows for it: charging, starting, stopping */
  state: string;
  /** the wish's priority (null: the node's) */
  priority: number | null;
  /** the target was told to stop by the depot (its kind), or null */
  yielding: string | null;
  /** a session is there (pending or active), not only a START on its way */
  session: boolean;
}

/** The depot's word at one check. */
export interface DepotWord {
  /** msg.depot (null: the depot could not be asked yet) */
  view: DepotView | null;
  /** the session must stop: a turn, a shed, a higher priority, a full car */
  yield?: Yield;
  /** ask: the START may go (its grant is recorded) */
  granted?: boolean;
  /** ask not granted: why, in one line */
  reason?: string;
}

/** What the controller asks of a depot (ControlDeps.depot); a target is a key (targetKey). */
export interface DepotHook {
  hold(key: string, facts: HoldFacts): Promise<DepotWord>;
  ask(key: string, priority: number | null): Promise<DepotWord>;
  release(key: string): Promise<DepotWord>;
  /** progress could not be read: the target's entry is renewed, nothing else */
  unread(key: string): void;
}

export interface DepotLinkOptions {
  pool: GrantPool;
  settings: DepotSettings;
  /** the node's priority, for a wish without msg.priority */
  priority: number;
  /** the node's check interval and wait timeout, ms */
  checkMs: number;
  waitMs: number;
  /** monotonic ms, and a timer (the controller's clock) */
  clock: { now(): number; after(ms: number, fn: () => void): () => void };
  /** once per outage of the depot, and when it answers again */
  warn(text: string): void;
  log(text: string): void;
  /** a check of the target now: a slot may be free for it */
  poke(key: string): void;
}

interface Seen {
  trace: EnergyTrace;
  /** the depot may have an entry for it (unknown after a restart: yes) */
  mayHave: boolean;
  /** the last check found a session: a START now means that session ended, and its grant is given up first */
  hadSession: boolean;
  /**
   * what the car at this connector was last measured to draw, kW (0: not
   * measured): its next session counts at least this until measured again
   * (a car shed for drawing more than assumedKW does not ask again at
   * assumedKW). Forgotten when nothing of the connector counts (released).
   */
  drewKW: number;
  view: DepotView | null;
}

export class DepotLink implements DepotHook {
  private readonly seen = new Map<string, Seen>();
  private down = false;
  private pokeTimer: (() => void) | null = null;
  private lastPoke = -Infinity;
  private readonly off: () => void;
  private readonly lapseMs: number;
  private readonly waitMs: number;
  private readonly staleMs: number;
  private readonly keepMs: number;

  constructor(private readonly o: DepotLinkOptions) {
    // A grant lapses only when nobody renewed it this long while others renewed theirs (its node is gone).
    this.lapseMs = Math.max(3_600_000, 20 * o.checkMs);
    // A waiter renews at every check (backed off to 10 checks while progress cannot be read).
    this.waitMs = Math.max(120_000, 12 * o.checkMs + o.waitMs);
    this.staleMs = Math.max(30_000, 5 * o.checkMs);
    this.keepMs = Math.max(o.settings.idleWindowMs, MEASURE_SPAN_MS) + 2 * o.checkMs + 10_000;
    this.off = o.pool.onChange((mayAdmit) => mayAdmit && this.changed());
  }

  async hold(key: string, f: HoldFacts): Promise<DepotWord> {
    const s = this.o.settings;
    const seen = this.of(key);
    const now = this.o.clock.now();
    if (f.transactionId !== null && f.energyKWh !== undefined) seen.trace.add(f.transactionId, now, f.energyKWh);
    else if (f.transactionId === null) seen.trace.clear();
    const assumedKW = Math.max(s.assumedKW, seen.drewKW);
    const power = f.transactionId === null ? { kW: assumedKW, source: 'assumed' as const } : seen.trace.power(now, this.staleMs, assumedKW);
    if (power.source === 'measured') seen.drewKW = power.kW;
    const note = { state: f.state, kWSource: power.source, yielding: f.yielding };
    const a = await this.o.pool.sync(key, { op: 'hold', priority: f.priority ?? this.o.priority, weight: power.kW, lapseMs: this.lapseMs, note, create: s.countStation ? { station: true } : null });
    if (!a.ok) return this.unavailable(seen, a.reason);
    this.up();
    seen.mayHave = a.entry !== null;
    seen.hadSession = f.session;
    seen.view = depotView(a.table, a.position);
    if (!a.entry || a.entry.note.station === true || a.entry.state !== 'granted' || f.transactionId === null || f.yielding) return { view: seen.view };
    const idle = idleFor(seen.trace.drawn(s.idleWindowMs), s);
    if (idle) return { view: seen.view, yield: idle };
    const stop = yieldFor(a.table, a.entry, s);
    return stop ? { view: seen.view, yield: fullAtStop(seen.trace.span(), s) ?? stop } : { view: seen.view };
  }

  async ask(key: string, priority: number | null): Promise<DepotWord> {
    const seen = this.of(key);
    seen.trace.clear();
    // A START after a session of its own ended (a turn, the driver): that slot is given up, and it asks at the back.
    const requeue = seen.hadSession;
    const a = await this.o.pool.sync(key, { op: 'ask', priority: priority ?? this.o.priority, weight: Math.max(this.o.settings.assumedKW, seen.drewKW), waitMs: this.waitMs, lapseMs: this.lapseMs, note: { state: 'queued', kWSource: 'assumed', yielding: null }, requeue });
    if (!a.ok) return { ...this.unavailable(seen, a.reason), granted: false, reason: `waiting for a slot: the depot cannot be asked (${a.reason}); no START until it can` };
    this.up();
    seen.mayHave = true;
    seen.hadSession = false;
    seen.view = depotView(a.table, a.position);
    return a.granted ? { view: seen.view, granted: true } : { view: seen.view, granted: false, reason: queueReason(a.table, a.position) };
  }

  async release(key: string): Promise<DepotWord> {
    const seen = this.seen.get(key);
    // Nothing of it can be in the table: no operation (an idle connector costs the depot nothing).
    if (seen && !seen.mayHave) return { view: seen.view };
    const s = this.of(key);
    const a: GrantAnswer = await this.o.pool.sync(key, { op: 'release' });
    if (!a.ok) return this.unavailable(s, a.reason);
    this.up();
    s.mayHave = false;
    s.hadSession = false;
    s.drewKW = 0;
    s.trace.clear();
    s.view = depotView(a.table, 0);
    return { view: s.view };
  }

  unread(key: string): void {
    if (this.seen.get(key)?.mayHave === false) return;
    void this.o.pool.sync(key, { op: 'look' }).catch(() => undefined);
  }

  /** The node closed: no more pokes. Its targets' entries stay (a redeploy keeps them; a removed node releases them through its book). */
  close(): void {
    this.off();
    this.pokeTimer?.();
    this.pokeTimer = null;
  }

  private of(key: string): Seen {
    let seen = this.seen.get(key);
    if (!seen) this.seen.set(key, (seen = { trace: new EnergyTrace(this.keepMs, this.o.settings.idleWindowMs > 0 ? this.o.settings.idleWindowMs : Infinity), mayHave: true, hadSession: false, drewKW: 0, view: null }));
    return seen;
  }

  /** The depot cannot be asked or cannot keep a change: said once per outage; nothing starts, running sessions are left alone. */
  private unavailable(seen: Seen, reason: string): DepotWord {
    if (!this.down) {
      this.down = true;
      this.o.warn(`The depot cannot be asked (${reason}): no new START until it can; running sessions are left as they are`);
    }
    return { view: seen.view };
  }

  private up(): void {
    if (!this.down) return;
    this.down = false;
    this.o.log('The depot answers again: STARTs go on in the queue\'s order');
  }

  /**
   * Room may have freed: the waiters of this node that may fit now are
   * checked at once rather than a check later (at most once a second, or
   * once per check interval when that is shorter).
   */
  private changed(): void {
    if (this.pokeTimer) return;
    const wait = Math.max(0, this.lastPoke + Math.min(1000, this.o.checkMs) - this.o.clock.now());
    this.pokeTimer = this.o.clock.after(wait, () => {
      this.pokeTimer = null;
      this.lastPoke = this.o.clock.now();
      for (const [key, seen] of this.seen) {
        const v = seen.view;
        if (!v || v.position === null) continue;
        const free = v.limit !== null ? v.limit - v.inUse : 1;
        if (v.position <= Math.min(16, Math.max(2, free + 1))) this.o.poke(key);
      }
    });
  }
}
