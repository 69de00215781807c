/**
 * Polling as a feature (spec §6: the service has no events). Watches many RFID
 * tokens at one interval with a single timer that spreads the polls evenly over
 * the interval, turns successive records into events, and estimates power.
 * No Node-RED and no HTTP in here: the poll function is given.
 */
import { ChargingError } from '../errors';
import { CreatedAtCache, deriveSession, DeriveOptions, meterKWh, ProgressRecord, recordTimes, SessionInfo, SessionTotals, sessionTotals } from './record';
import type { PollFn } from './wait';
import { monotonicNow } from '../clock';
import { transition } from './lifecycle';

export type WatchEventKind =
  | 'pending' // a session appeared, not started yet (no transactionId)
  | 'started' // the session has a transactionId
  | 'updated' // the meter advanced
  | 'ended' // the session is no longer found
  | 'poll'; // a poll with no change (only when every poll is asked for)

export interface WatchedSession extends SessionInfo {
  /** kW over the readings of the last 10 s or a little more; null until there are two */
  powerKW: number | null;
}

/** On 'ended': the last values seen, with the session's totals (endedAt: when the end was seen). */
export type EndedSession = WatchedSession & SessionTotals;

export interface WatchEvent {
  token: string;
  event: WatchEventKind;
  /** the record as the service returned it, or null when the session is gone */
  record: ProgressRecord | null;
  /** an EndedSession on 'ended' */
  session: WatchedSession | EndedSession | null;
}

export interface WatcherOptions {
  intervalMs: number;
  /** emit 'poll' events for polls that changed nothing */
  emitEveryPoll?: boolean;
  derive?: DeriveOptions;
  /** longest gap between two ticks of the single timer */
  maxTickMs?: number;
  /** read at every tick: how much longer than intervalMs a round takes now (Max requests per second; default 1) */
  stretch?: () => number;
  /** pause before the query that confirms an end (default: half the interval, at most 2 s) */
  confirmEndMs?: number;
  now?: () => number;
  /**
   * Called after a poll changed what the next event is decided from (a session
   * appeared, started, its meter moved, it ended): the caller keeps it across
   * restarts (see SavedState). Not called for polls that changed nothing. The
   * state is the watcher's own object for that token, updated in place by later
   * polls (and handed over again when they change it): a caller that keeps it
   * by reference sees the latest values; one that needs this moment's copies it.
   */
  onState?: (token: string, state: SavedState | undefined) => void;
  /**
   * Called at the end of every tick (at least once a second while anything is
   * watched): work the caller batches rides on the watcher's own wake-ups
   * instead of arming timers of its own.
   */
  onTick?: () => void;
  /**
   * Coordinate replicas (docs/fleet.md): may this process poll the token now
   * (it holds its lease)? Asked before every poll; a token it may not poll
   * keeps its place in the round.
   */
  mayPoll?: (token: string) => boolean;
  /**
   * Coordinate replicas: keeps the state a poll changed where the fleet
   * shares it, before that poll's events go out (commit, then emit). Resolves
   * false when it could not (the lease was lost, Redis is away): the events
   * are not emitted and the token's state goes back to the one last kept, so
   * the replica that polls it next decides them again from there.
   */
  commit?: (token: string, state: SavedState | null) => Promise<boolean>;
  /** Coordinate replicas: the outcome of every poll (null: answered), to tell a replica that cannot reach the service */
  onPolled?: (token: string, err: ChargingError | null) => void;
}

/**
 * What a watcher keeps of a token across redeploys and restarts: enough to
 * decide the next event (nothing when unchanged, `updated`, `ended` once,
 * `started` for a new transaction). Absent: no session seen (or it ended).
 * Plain JSON, so that any context store can keep it.
 */
export interface SavedState {
  transactionId: string | null;
  meterEnd: number | null;
  /** the last values seen: what `ended` carries when the session ended while Node-RED was down */
  session: WatchedSession | null;
}

interface Entry {
  token: string;
  inFlight: boolean;
  seen: boolean;
  transactionId: string | null;
  meterEnd: number | null;
  /** the last values seen: an object of the entry's own, updated in place (see keep) */
  last: WatchedSession | null;
  /** the state last handed to onState, updated in place (see save); null when no session is seen */
  state: SavedState | null;
  /** meter readings for the power estimate, flat: [at, kWh, at, kWh, …], oldest first (see power) */
  samples: number[] | null;
  lastError: string | null;
  /** the session's createdAt as last parsed (see recordTimes) */
  created: CreatedAtCache;
}

/**
 * Polls a tick takes when they come often: each wake-up of an idle process
 * costs about as much again as the poll it makes (caches gone cold), so four
 * polls per wake-up rather than one (100 tokens at 10 s: a tick every 400 ms,
 * not 100 ms). Measured at 100 tokens (bench/watch-profile.ts, 3 rounds, 30 s
 * settle): our node 2 997 -> 1 650 µs per poll, bare axios on the same
 * schedule 2 524 -> 1 374 (ours/bare about the same: see docs/performance.md).
 * The four go out together every 400 ms, so up to four pooled connections may
 * be open instead of one; Max requests per second spaces them when set.
 */
export const POLLS_PER_TICK = 4;

/**
 * The tick period of a watcher: the interval shared among the tokens, four
 * polls per tick (POLLS_PER_TICK) but never longer than the interval (a tick
 * polls a token at most once, so fewer than four tokens tick once per
 * interval), within [20 ms, maxTickMs]. Exported so that the benchmark's bare
 * polling runs on exactly this schedule.
 */
export function watchTickMs(intervalMs: number, tokens: number, maxTickMs = 1000): number {
  const n = Math.max(1, tokens);
  return Math.min(maxTickMs, Math.max(20, (Math.min(POLLS_PER_TICK, n) * intervalMs) / n));
}

/**
 * One timer for all watched tokens: every tick polls the share of tokens that
 * fall due, in round-robin order, so N tokens at interval I cost N polls per
 * interval, spread over it a few per tick (watchTickMs), however large N is.
 * The order is a queue: a token is taken from the head, polled and put back at the tail, so it comes round
 * again after every other token, one interval later. New tokens wait in a
 * queue of their own that goes first. Adding or removing a token costs O(1)
 * amortised: a removed token is dropped when it reaches the head.
 */
export class SessionWatcher {
  private readonly entries = new Map<string, Entry>();
  /** round-robin order, from `head`; may hold entries no longer watched (dropped at the head) */
  private queue: Entry[] = [];
  private head = 0;
  /** added and not polled yet: polled before the round-robin queue */
  private fresh: Entry[] = [];
  private freshHead = 0;
  private budget = 0;
  private timer: NodeJS.Timeout | null = null;
  /** the delay `timer` was armed with: a tick re-arms the same Timeout (refresh) while it stays the same */
  private timerMs = -1;
  private lastTick = 0;
  private closed = false;
  private readonly now: () => number;
  /** pending "is it really gone?" queries, cleared on close */
  private readonly confirmTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly poll: PollFn,
    private readonly options: WatcherOptions,
    private readonly onEvent: (e: WatchEvent) => void,
    private readonly onError: (token: string, err: ChargingError) => void,
  ) {
    this.now = options.now ?? monotonicNow;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Starts watching the tokens not watched yet; returns how many were added.
   * `saved` gives a token's state kept from before a redeploy or restart, so
   * that an unchanged session does not report `started` again.
   */
  watch(tokens: Iterable<string>, saved?: (token: string) => SavedState | undefined): number {
    if (this.closed) return 0;
    let added = 0;
    for (const token of tokens) {
      if (this.entries.has(token)) continue;
      const entry: Entry = {
        token,
        inFlight: false,
        seen: false,
        transactionId: null,
        meterEnd: null,
        last: null,
        state: null,
        samples: null,
        lastError: null,
        created: { text: null, ms: NaN },
      };
      const state = saved?.(token);
      if (state) {
        entry.seen = true;
        entry.transactionId = state.transactionId;
        entry.meterEnd = state.meterEnd;
        // A copy: the loaded object is the saved state's, and the entry updates its own in place.
        entry.last = state.session && { ...state.session };
      }
      this.entries.set(token, entry);
      // New tokens are polled first, from the next tick, rather than a whole interval later.
      this.fresh.push(entry);
      added++;
    }
    if (added === 0) return 0;
    this.budget = Math.max(this.budget, 1);
    this.schedule();
    return added;
  }

  /** Stops watching these tokens; returns how many were watched. */
  unwatch(tokens: Iterable<string>): number {
    let removed = 0;
    for (const token of tokens) if (this.entries.delete(token)) removed++;
    if (this.entries.size === 0) this.unwatchAll();
    // Removed entries leave the queues at the head; compact when they pile up (watch/unwatch churn).
    else if (this.queue.length + this.fresh.length > 2 * this.entries.size + 1024) this.compact();
    return removed;
  }

  unwatchAll(): void {
    this.entries.clear();
    this.queue = [];
    this.fresh = [];
    this.head = this.freshHead = 0;
    this.stopTimer();
  }

  /** The watched tokens, in the order they were added. */
  tokens(): string[] {
    return [...this.entries.keys()];
  }

  close(): void {
    this.closed = true;
    for (const t of this.confirmTimers) clearTimeout(t);
    this.confirmTimers.clear();
    this.unwatchAll();
  }

  private live(e: Entry): boolean {
    return this.entries.get(e.token) === e;
  }

  private compact(): void {
    this.queue = this.queue.slice(this.head).filter((e) => this.live(e));
    this.fresh = this.fresh.slice(this.freshHead).filter((e) => this.live(e));
    this.head = this.freshHead = 0;
  }

  /** The next entry in polling order (fresh first), or undefined; the array behind a drained head is let go. */
  private next(): Entry | undefined {
    if (this.freshHead < this.fresh.length) {
      const e = this.fresh[this.freshHead++];
      if (this.freshHead === this.fresh.length) {
        this.fresh = [];
        this.freshHead = 0;
      }
      return e;
    }
    if (this.head >= this.queue.length) return undefined;
    const e = this.queue[this.head++];
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return e;
  }

  /** The time one round over every token takes now: the interval, stretched to fit the request budget. */
  private intervalMs(): number {
    return this.options.intervalMs * Math.max(1, this.options.stretch?.() ?? 1);
  }

  private schedule(): void {
    if (this.timer || this.closed || this.entries.size === 0) return;
    this.lastTick = this.now();
    this.arm(null, 0);
  }

  /** Arms the tick timer: `fired` again when the delay is the one it had (no new Timeout per tick), else a new one. */
  private arm(fired: NodeJS.Timeout | null, ms: number): void {
    if (fired !== null && ms === this.timerMs && typeof fired.refresh === 'function') {
      this.timer = fired.refresh();
      return;
    }
    this.timerMs = ms;
    this.timer = setTimeout(() => this.tick(), ms);
    this.timer.unref?.();
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private tick(): void {
    const fired = this.timer;
    this.timer = null;
    if (this.closed || this.entries.size === 0) return;
    const now = this.now();
    const elapsed = Math.max(0, now - this.lastTick);
    this.lastTick = now;
    const n = this.entries.size;
    // Share of the list that fell due since the last tick; never more than one round.
    // Read once per tick: the stretch asks the request budget, and the next tick's period uses it too.
    const intervalMs = this.intervalMs();
    this.budget = Math.min(n, this.budget + (n * elapsed) / intervalMs);
    let due = Math.floor(this.budget);
    this.budget -= due;
    // Skipping unwatched tokens costs no budget; at most one pass over the queues per tick.
    const steps = this.fresh.length - this.freshHead + (this.queue.length - this.head);
    for (let s = 0; due > 0 && s < steps; s++) {
      const entry = this.next();
      if (!entry) break;
      if (!this.live(entry)) continue;
      due--;
      this.queue.push(entry);
      if (!entry.inFlight && (!this.options.mayPoll || this.options.mayPoll(entry.token))) this.pollOne(entry);
    }
    this.arm(fired, watchTickMs(intervalMs, this.entries.size, this.options.maxTickMs));
    const onTick = this.options.onTick;
    if (onTick) {
      try {
        onTick();
      } catch (err) {
        this.report('', new ChargingError('INTERNAL', `Watch tick: ${(err as Error)?.message ?? String(err)}`));
      }
    }
  }

  private pollOne(entry: Entry, confirming = false): void {
    entry.inFlight = true;
    this.poll(entry.token).then(
      (record) => {
        this.options.onPolled?.(entry.token, null);
        if (this.entries.get(entry.token) !== entry) return void (entry.inFlight = false); // unwatched meanwhile
        entry.lastError = null;
        if (record === null && entry.seen && !confirming) return this.confirmEnd(entry);
        entry.inFlight = false;
        const { seen, transactionId, meterEnd } = entry;
        const commit = this.options.commit;
        const before = commit ? snapshot(entry) : null;
        const events = this.observe(entry, record);
        const changed = entry.seen !== seen || entry.transactionId !== transactionId || entry.meterEnd !== meterEnd;
        if (commit && before && changed) return this.commitThenEmit(commit, entry, before, events);
        for (const e of events) this.deliver(e);
        if (this.live(entry) && changed) this.save(entry);
      },
      (err: unknown) => {
        entry.inFlight = false;
        if (this.entries.get(entry.token) !== entry) return;
        const error = err instanceof ChargingError ? err : new ChargingError('INTERNAL', String((err as Error)?.message ?? err));
        if (error.code === 'CLOSED') return;
        this.options.onPolled?.(entry.token, error);
        // One report per streak of the same failure, not one per poll.
        if (entry.lastError === error.message) return;
        entry.lastError = error.message;
        this.report(entry.token, error);
      },
    );
  }

  /**
   * The end rule (README "Watch mode"): a session that was there a poll ago and
   * is now "not found" is asked for once more, after a short pause, before it is
   * reported ended. One answer is not enough: a gateway that loses its route for
   * a moment, or one bad node behind a load balancer, would otherwise end (and
   * then start again) every watched session. The entry stays in flight meanwhile,
   * so the regular schedule does not poll it twice.
   */
  private confirmEnd(entry: Entry): void {
    const pauseMs = this.options.confirmEndMs ?? Math.min(2000, this.options.intervalMs / 2);
    const timer = setTimeout(() => {
      this.confirmTimers.delete(timer);
      if (this.closed || this.entries.get(entry.token) !== entry) return void (entry.inFlight = false);
      // The lease may have gone meanwhile: the new owner confirms the end itself.
      if (this.options.mayPoll && !this.options.mayPoll(entry.token)) return void (entry.inFlight = false);
      this.pollOne(entry, true);
    }, pauseMs);
    timer.unref?.();
    this.confirmTimers.add(timer);
  }

  /**
   * Coordinate replicas: the changed state is committed to the fleet first;
   * only a committed change is emitted (and kept locally), and every committed
   * change is, whatever happened to the token meanwhile: the commit is the
   * point of truth. The entry stays in flight meanwhile, so the schedule does
   * not poll it again on top.
   */
  private commitThenEmit(commit: NonNullable<WatcherOptions['commit']>, entry: Entry, before: EntrySnapshot, events: WatchEvent[]): void {
    entry.inFlight = true;
    const state: SavedState | null = entry.seen ? { transactionId: entry.transactionId, meterEnd: entry.meterEnd, session: entry.last && { ...entry.last } } : null;
    commit(entry.token, state).then(
      (ok) => {
        entry.inFlight = false;
        // A committed change goes out even when the token was released meanwhile: the new owner resumes from it.
        if (ok) for (const e of events) this.deliver(e);
        if (!this.live(entry)) return;
        if (!ok) return restore(entry, before);
        this.save(entry);
      },
      (err: unknown) => {
        entry.inFlight = false;
        if (this.live(entry)) restore(entry, before);
        this.report(entry.token, new ChargingError('INTERNAL', `Could not keep the state of ${entry.token} in the fleet: ${(err as Error)?.message ?? String(err)}`));
      },
    );
  }

  /** A listener that throws must not become an unhandled rejection (that would stop Node-RED). */
  private deliver(e: WatchEvent): void {
    try {
      this.onEvent(e);
    } catch (err) {
      this.report(e.token, new ChargingError('INTERNAL', `Could not pass on the "${e.event}" event for ${e.token}: ${(err as Error)?.message ?? String(err)}`));
    }
  }

  /**
   * Hands the state that decides the next event to the caller, to keep across
   * restarts: the entry's own object, updated in place from then on (see
   * WatcherOptions.onState), not a new one per change.
   */
  private save(entry: Entry): void {
    const save = this.options.onState;
    if (!save) return;
    let state: SavedState | undefined;
    if (entry.seen) {
      state = entry.state ??= { transactionId: null, meterEnd: null, session: null };
      state.transactionId = entry.transactionId;
      state.meterEnd = entry.meterEnd;
      state.session = entry.last;
    } else {
      entry.state = null;
    }
    try {
      save(entry.token, state);
    } catch (err) {
      this.report(entry.token, new ChargingError('INTERNAL', `Could not keep the state of ${entry.token}: ${(err as Error)?.message ?? String(err)}`));
    }
  }

  private report(token: string, err: ChargingError): void {
    try {
      this.onError(token, err);
    } catch {
      // nothing left to tell
    }
  }

  /** Turns a poll result into zero or more events (the lifecycle table, lifecycle.ts), and updates the entry. */
  private observe(entry: Entry, record: ProgressRecord | null): WatchEvent[] {
    const events: WatchEvent[] = [];
    const token = entry.token;
    if (record === null) {
      if (transition(entry, null).ends) {
        events.push(this.ended(entry));
        this.reset(entry);
      } else if (this.options.emitEveryPoll) {
        events.push({ token, event: 'poll', record: null, session: null });
      }
      return events;
    }
    // Parsed once, for the derived values and for the power estimate.
    const times = recordTimes(record, this.options.derive?.timestampZone, entry.created);
    const info = deriveSession(record, this.options.derive, times);
    const step = transition(entry, info);
    if (step.ends) {
      // Another session on the same token since the last poll (a new transaction, or one still pending): the old one ended.
      events.push(this.ended(entry));
      this.reset(entry);
    }
    // deriveSession's object is this poll's own: completed in place rather than copied.
    const session = info as WatchedSession;
    session.powerKW = this.power(entry, times.timestampMs, info);
    const kind: WatchEventKind | null = step.event ?? (this.options.emitEveryPoll ? 'poll' : null);
    entry.seen = true;
    entry.transactionId = info.transactionId;
    entry.meterEnd = info.meterEnd;
    this.keep(entry, session);
    if (kind) events.push({ token, event: kind, record, session });
    return events;
  }

  /**
   * Keeps the session's values in the entry's own object. A copy: the event's
   * object goes into a flow, where a function node may edit msg.session in
   * place, and what the entry keeps decides the next event, the state saved for
   * restarts and what ended carries. Updated in place rather than copied anew,
   * and a field whose value did not change keeps the value already held: a new
   * object per poll, kept for a whole interval, outlived V8's young generation
   * and was copied into the old one (#19; measured at 100 tokens: 267 against
   * 279 ms of scavenges over the same windows, per poll within noise).
   */
  private keep(entry: Entry, session: WatchedSession): void {
    if (entry.last === null) {
      entry.last = { ...session };
      return;
    }
    const to = entry.last as unknown as Record<string, unknown>;
    const from = session as unknown as Record<string, unknown>;
    for (const k in from) {
      const v = from[k];
      if (to[k] !== v && !sameList(to[k], v)) to[k] = v;
    }
  }

  /** The ended event: the last values seen and the totals, endedAt by the wall clock (people read it). */
  private ended(entry: Entry): WatchEvent {
    const session: EndedSession | null = entry.last && { ...entry.last, ...sessionTotals(entry.last, Date.now()) };
    return { token: entry.token, event: 'ended', record: null, session };
  }

  private reset(entry: Entry): void {
    entry.seen = false;
    entry.transactionId = null;
    entry.meterEnd = null;
    entry.last = null;
    entry.samples = null;
  }

  /**
   * kW over the last POWER_WINDOW_MS or a little more (by the record's own
   * clock when it has one), not between two successive readings: meters count
   * whole Wh, so at 11 kW a one-second poll sees 3 or 4 Wh and reads 11 kW as
   * 14.4 kW. Over at least ten seconds that error is within 3 %. Until that
   * much has been seen, the estimate is over what there is.
   */
  private power(entry: Entry, recordMs: number, info: SessionInfo): number | null {
    if (info.energyKWh === null || info.meterStart === null || info.meterEnd === null) return entry.last?.powerKW ?? null;
    // From the raw meter values: the rounded energyKWh would skew short intervals.
    const kwhNow = meterKWh(info.meterStart, info.meterEnd, this.options.derive?.meterUnit);
    const own = !Number.isNaN(recordMs);
    // Wall time here: it is compared with the records' own timestamps.
    const at = own ? recordMs : Date.now();
    const s = entry.samples;
    if (!s) {
      entry.samples = [at, kwhNow];
      return entry.last?.powerKW ?? null;
    }
    const lastAt = s[s.length - 2];
    const lastKWh = s[s.length - 1];
    // The same record polled again (or, without a record clock, the same reading): nothing new to estimate from.
    if (at <= lastAt || (!own && kwhNow === lastKWh)) return entry.last?.powerKW ?? null;
    if (kwhNow < lastKWh) {
      entry.samples = [at, kwhNow]; // the meter went back: start again from here
      return null;
    }
    s.push(at, kwhNow);
    // Drop the oldest reading while the next one still spans the window.
    while (s.length > 4 && at - s[2] >= POWER_WINDOW_MS) s.splice(0, 2);
    const kw = (kwhNow - s[1]) / ((at - s[0]) / 3_600_000);
    return kw >= 0 && Number.isFinite(kw) ? Math.round(kw * 100) / 100 : null;
  }
}

/** What decides an entry's next event, copied before a poll whose change must be committed first. */
type EntrySnapshot = Pick<Entry, 'seen' | 'transactionId' | 'meterEnd' | 'last' | 'samples'>;

function snapshot(e: Entry): EntrySnapshot {
  return { seen: e.seen, transactionId: e.transactionId, meterEnd: e.meterEnd, last: e.last && { ...e.last }, samples: e.samples && [...e.samples] };
}

function restore(e: Entry, s: EntrySnapshot): void {
  e.seen = s.seen;
  e.transactionId = s.transactionId;
  e.meterEnd = s.meterEnd;
  e.last = s.last;
  e.samples = s.samples;
}

/** Two arrays of the same items (the warnings: a new, usually empty, list on every poll). */
function sameList(a: unknown, b: unknown): boolean {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The power estimate spans at least this much of the record clock once it has seen it. */
const POWER_WINDOW_MS = 10_000;
