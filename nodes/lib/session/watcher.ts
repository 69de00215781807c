/**
 * Polling as a feature (spec §6: the service has no events). Watches many RFID
 * tokens at one interval and wires three parts: the schedule (schedule.ts)
 * says which token is polled when, the tracker (tracker.ts) turns each answer
 * into the next state and its events, and this class polls, confirms ends,
 * commits the new state through the commit hook, then emits.
 * No Node-RED and no HTTP in here: the poll function is given.
 */
import { debuglog } from 'node:util';
import { ChargingError } from '../errors';
import type { DeriveOptions, ProgressRecord } from './record';
import type { PollFn } from './wait';
import { monotonicNow } from '../clock';
import { PollSchedule } from './schedule';
import { decidesDifferently, SavedState, savedState, step, TrackerOptions, TrackerState, trackerState, WatchEvent } from './tracker';

/** NODE_DEBUG=charging-fleet (lines start with Date.now()): polls the lease fence stopped and changes not committed, on stderr (the nemesis's evidence). */
const trace = debuglog('charging-fleet');

export { POLLS_PER_TICK, watchTickMs } from './schedule';
export type { EndedSession, SavedState, WatchedSession, WatchEvent, WatchEventKind } from './tracker';

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
   * are not emitted and the token keeps the state last kept, so the replica
   * that polls it next decides them again from there.
   */
  commit?: (token: string, state: SavedState | null) => Promise<boolean>;
  /** Coordinate replicas: the outcome of every poll (null: answered), to tell a replica that cannot reach the service */
  onPolled?: (token: string, err: ChargingError | null) => void;
}

interface Entry {
  readonly token: string;
  inFlight: boolean;
  /** what decides the token's next event: replaced by each poll's step once it is kept */
  state: TrackerState;
  /** the state last handed to onState, updated in place (see save); null when no session is seen */
  saved: SavedState | null;
  lastError: string | null;
}

export class SessionWatcher {
  private readonly schedule: PollSchedule<Entry>;
  private readonly tracking: TrackerOptions;
  private closed = false;
  /** pending "is it really gone?" queries, cleared on close */
  private readonly confirmTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly poll: PollFn,
    private readonly options: WatcherOptions,
    private readonly onEvent: (e: WatchEvent) => void,
    private readonly onError: (token: string, err: ChargingError) => void,
  ) {
    const { intervalMs, maxTickMs, stretch } = options;
    this.schedule = new PollSchedule<Entry>({ intervalMs, maxTickMs, stretch, now: options.now ?? monotonicNow }, (e) => this.due(e), () => this.ticked());
    this.tracking = { emitEveryPoll: options.emitEveryPoll, derive: options.derive };
  }

  get size(): number {
    return this.schedule.size;
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
      if (this.schedule.has(token)) continue;
      this.schedule.add({ token, inFlight: false, state: trackerState(token, saved?.(token)), saved: null, lastError: null });
      added++;
    }
    return added;
  }

  /** Stops watching these tokens; returns how many were watched. */
  unwatch(tokens: Iterable<string>): number {
    return this.schedule.remove(tokens);
  }

  unwatchAll(): void {
    this.schedule.clear();
  }

  /** Watched tokens whose session has started (a transaction seen) and not ended: read by a metrics scrape, not per poll. */
  get charging(): number {
    let n = 0;
    for (const e of this.schedule.scheduled()) if (e.state.seen && e.state.transactionId !== null) n++;
    return n;
  }

  /** The watched tokens, in the order they were added. */
  tokens(): string[] {
    return this.schedule.tokens();
  }

  close(): void {
    this.closed = true;
    for (const t of this.confirmTimers) clearTimeout(t);
    this.confirmTimers.clear();
    this.schedule.close();
  }

  /** The schedule's turn for a token: polled unless still in flight or, with replicas, another one's. */
  private due(entry: Entry): void {
    if (!entry.inFlight && (!this.options.mayPoll || this.options.mayPoll(entry.token))) this.pollOne(entry);
  }

  private ticked(): void {
    const onTick = this.options.onTick;
    if (!onTick) return;
    try {
      onTick();
    } catch (err) {
      this.report('', new ChargingError('INTERNAL', `Watch tick: ${(err as Error)?.message ?? String(err)}`));
    }
  }

  private pollOne(entry: Entry, confirming = false): void {
    entry.inFlight = true;
    const fence = this.fenceFor(entry.token);
    this.poll(entry.token, undefined, fence?.ask).then(
      (record) => {
        this.options.onPolled?.(entry.token, null);
        if (!this.schedule.holds(entry)) return void (entry.inFlight = false); // unwatched meanwhile
        entry.lastError = null;
        if (record === null && entry.state.seen && !confirming) return this.confirmEnd(entry);
        entry.inFlight = false;
        this.answered(entry, record);
      },
      (err: unknown) => {
        entry.inFlight = false;
        // Not sent: the lease went while the poll waited its turn; the token is another replica's now.
        if (!this.schedule.holds(entry) || fence?.refused) return void (fence?.refused && trace('%d poll of %s not sent: its lease went', Date.now(), entry.token));
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
   * Coordinate replicas: a poll asks the lease again right before it goes on
   * the wire, not only when its turn came. It may wait for the request budget
   * meanwhile (or the process may stand still), and an answer on a lapsed
   * lease cannot be committed: a request spent from the fleet's budget for
   * nothing, while the next holder polls the token anyway.
   */
  private fenceFor(token: string): { ask: () => boolean; refused: boolean } | undefined {
    const mayPoll = this.options.mayPoll;
    if (!mayPoll) return undefined;
    const fence = {
      refused: false,
      ask: () => {
        if (mayPoll(token)) return true;
        fence.refused = true;
        return false;
      },
    };
    return fence;
  }

  /** A confirmed answer: the tracker's step, kept (committed first when it changed what decides), then emitted. */
  private answered(entry: Entry, record: ProgressRecord | null): void {
    const { state, events } = step(entry.state, record, Date.now(), this.tracking);
    const changed = decidesDifferently(entry.state, state);
    const commit = this.options.commit;
    if (commit && changed) return this.commitThenEmit(commit, entry, state, events);
    this.keep(entry, state);
    for (const e of events) this.deliver(e);
    if (changed && this.schedule.holds(entry)) this.save(entry);
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
      if (this.closed || !this.schedule.holds(entry)) return void (entry.inFlight = false);
      // The lease may have gone meanwhile: the new owner confirms the end itself.
      if (this.options.mayPoll && !this.options.mayPoll(entry.token)) return void (entry.inFlight = false);
      this.pollOne(entry, true);
    }, pauseMs);
    timer.unref?.();
    this.confirmTimers.add(timer);
  }

  /**
   * Coordinate replicas: the new state is committed to the fleet first; only
   * a committed state is kept and its events emitted, and every committed
   * change is, whatever happened to the token meanwhile: the commit is the
   * point of truth. Not committed: the token keeps the state it had. The
   * entry stays in flight meanwhile, so the schedule does not poll it again
   * on top.
   */
  private commitThenEmit(commit: NonNullable<WatcherOptions['commit']>, entry: Entry, next: TrackerState, events: WatchEvent[]): void {
    entry.inFlight = true;
    commit(entry.token, savedState(next)).then(
      (ok) => {
        entry.inFlight = false;
        if (!ok) return void trace('%d change of %s not committed: nothing emitted', Date.now(), entry.token);
        // A committed change goes out even when the token was released meanwhile: the new owner resumes from it.
        if (this.schedule.holds(entry)) this.keep(entry, next);
        for (const e of events) this.deliver(e);
        if (this.schedule.holds(entry)) this.save(entry);
      },
      (err: unknown) => {
        entry.inFlight = false;
        this.report(entry.token, new ChargingError('INTERNAL', `Could not keep the state of ${entry.token} in the fleet: ${(err as Error)?.message ?? String(err)}`));
      },
    );
  }

  /**
   * The entry takes the step's state. The object last handed to onState
   * follows the latest values at once, as the WatcherOptions.onState contract
   * says; it is handed over again (save) only when what decides changed.
   */
  private keep(entry: Entry, state: TrackerState): void {
    entry.state = state;
    if (entry.saved && state.seen) entry.saved.session = state.last as SavedState['session'];
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
    const { seen, transactionId, meterEnd, last } = entry.state;
    let saved: SavedState | undefined;
    if (seen) {
      saved = entry.saved ??= { transactionId: null, meterEnd: null, session: null };
      saved.transactionId = transactionId;
      saved.meterEnd = meterEnd;
      saved.session = last as SavedState['session'];
    } else {
      entry.saved = null;
    }
    try {
      save(entry.token, saved);
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
}
