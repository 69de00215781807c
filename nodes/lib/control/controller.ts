/**
 * One target kept in the state its flow wants: a check reads progress, takes
 * it into memory, decides (reconcile.ts) and sends at most one command, then
 * arms the next check. Checks of one target never overlap; everything waits on
 * the injected clock, and every request is bounded by the client's deadlines.
 */
import { ChargingError, isChargingError } from '../errors';
import { startCommand, stopCommand, type ChargingCommand } from '../session/commands';
import { deriveSession, type DeriveOptions, type ProgressRecord, type SessionInfo } from '../session/record';
import { type Action, type ControlMemory, type ControlSettings, type ControlState, toKept } from './memory';
import { actualState, applyWish, decide, type Decision, noteSent, observe, type WishOptions } from './reconcile';
import type { DepotHook, DepotWord } from '../depot/link';
import type { DepotView } from '../depot/rules';
import { counts, holdFacts, queued, takeYield } from './depot-step';
import type { ControlStore } from './store';
import { targetKey, viewOf, type ControlTarget, type ProgressView } from './view';

/** The clocks and the timer a controller runs on (a fake one in tests). */
export interface ControlClock {
  /** monotonic ms: every wait and the guard */
  now(): number;
  /** wall-clock ms: only for what is kept across a restart */
  wall(): number;
  /** calls fn after ms; returns a cancel */
  after(ms: number, fn: () => void): () => void;
}

export type CheckPriority = 'command' | 'poll';

export interface ControlDeps {
  /** one progress query for the target: its record, or null for no session */
  poll(target: ControlTarget, priority: CheckPriority): Promise<ProgressRecord | null>;
  /** one START or STOP; resolves when the service accepted it. `mayProceed`: asked right before each attempt goes on the wire (false: not sent) */
  send(command: ChargingCommand, mayProceed?: () => boolean): Promise<unknown>;
  store: ControlStore;
  clock: ControlClock;
  /** who may send: false while another process holds the target (a fleet's lease); default: always this one */
  mayCommand?(target: ControlTarget): boolean;
  /** after every check: the target's state; `changed` when state or wish differ from the last output */
  onState(snapshot: ControlSnapshot, changed: boolean): void;
  /** a failure found by a check nobody waits for (a timer's), once per streak of the same failure */
  onError(target: ControlTarget, err: ChargingError): void;
  /**
   * Coordinate replicas: true while another replica holds the target (its
   * lease): this one then neither reads progress nor reports, and looks again
   * at the confirm pace, so that it takes over quickly. Default: never.
   */
  passive?(target: ControlTarget): boolean;
  /**
   * Coordinate replicas: the latest wish for the target sent to any replica
   * (a number that grows with each); read at the start of every check by the
   * holder, applied when newer than the last one applied here.
   */
  pullWish?(target: ControlTarget): Promise<({ seq: number; wanted: boolean } & WishOptions) | null>;
  /** every check, so that closing can wait for one on the wire */
  track?(work: Promise<unknown>): void;
  /** the node's depot (charging-depot): a START only with a slot, the depot's STOPs (none: no limit) */
  depot?: DepotHook;
  derive?: DeriveOptions;
}

export interface ControlSnapshot {
  target: ControlTarget;
  state: ControlState;
  wanted: boolean | null;
  reason: string;
  /** derived from the last record (as the progress node derives it); null without a session */
  session: SessionInfo | null;
  attempt?: { n: number; of: number };
  guardLeftMs?: number;
  /** failed or busy while on is wanted: ms until the next START may go, from `at` */
  startInMs?: number;
  /** the depot's numbers (msg.depot); absent without a depot, null before it answered */
  depot?: DepotView | null;
  /** monotonic ms when taken */
  at: number;
}

/** Never check again sooner than this: a decision that says "now" must not spin. */
export const MIN_CHECK_MS = 50;

type Result = ChargingError | undefined;

function asError(err: unknown): ChargingError {
  return isChargingError(err) ? err : new ChargingError('INTERNAL', `Unexpected failure in charging-control (please report it): ${String((err as Error)?.message ?? err).slice(0, 300)}`);
}

/** A failed command that may have reached the station: its effect is awaited in progress, never sent again blindly. */
function mayHaveActed(err: ChargingError, action: Action): boolean {
  if (err.outcomeUnknown || err.code === 'OUTCOME_UNKNOWN') return true;
  // A STOP answered 404 or 409: only progress can tell whether the session goes on (as "make sure it ends").
  return action === 'STOP' && (err.code === 'NO_SESSION' || err.statusCode === 404 || err.statusCode === 409);
}

export class TargetController {
  readonly key: string;
  private current: Promise<Result> | null = null;
  private next: Promise<Result> | null = null;
  private cancelTimer: (() => void) | null = null;
  private closed = false;
  private savedText = '';
  private errorShape: string | null = null;
  private last: ControlSnapshot | null = null;
  /** wishes taken so far: a command whose send a new wish overtook is neither undone over it nor reported under the old decision */
  private wishes = 0;
  /** while progress cannot be read: the current backed-off interval (0: progress read fine last time) */
  private outageMs = 0;
  /** the refusal of START last reported (its shape): the same refusal at every retry is one episode, reported once */
  private refusalShown: string | null = null;
  /** failures of checks inside an outage already reported: not reported again */
  private readonly quiet = new WeakSet<ChargingError>();
  /** msg.restart was pressed and taken: the next state shown is output even when it is the one shown before (a press is answered) */
  private pressed = false;
  /** the depot's numbers last heard (msg.depot) */
  private depotView: DepotView | null = null;

  constructor(
    readonly target: ControlTarget,
    private readonly m: ControlMemory,
    private readonly s: ControlSettings,
    private readonly deps: ControlDeps,
  ) {
    this.key = targetKey(target);
  }

  get snapshot(): ControlSnapshot | null {
    return this.last;
  }

  get wanted(): boolean | null {
    return this.m.wanted;
  }

  /** A wish from the flow: checks now unless it changes nothing. Resolves with the failure of that check, if any. */
  async want(wanted: boolean, opts: WishOptions = {}): Promise<Result> {
    if (this.closed || !applyWish(this.m, wanted, opts, this.deps.clock.now(), this.s)) return undefined;
    this.wishes++;
    if (opts.restart === true) this.pressed = true;
    this.refusalShown = null;
    // A store that cannot write does not hold the wish back: the check still runs (a START waits for the store, a STOP does not).
    const unsaved = await this.save().then(() => undefined, asError);
    const err = await this.check('command');
    // Inside an outage already reported: the wish is kept and carried out once progress can be read.
    return unsaved ?? (err && this.quiet.has(err) ? undefined : err);
  }

  /** A check now, or right after the one running (never two at once). */
  check(priority: CheckPriority): Promise<Result> {
    if (this.closed) return Promise.resolve(undefined);
    if (!this.current) {
      const run = this.pass(priority).catch(asError);
      this.current = run.finally(() => {
        this.current = null;
      });
      this.deps.track?.(this.current);
      return this.current;
    }
    if (!this.next) {
      this.next = this.current.then(() => {
        this.next = null;
        return this.check(priority);
      });
    }
    return this.next;
  }

  /** No more checks, no timer; a command on the wire still has its answer written down. */
  close(): void {
    this.closed = true;
    this.cancelTimer?.();
    this.cancelTimer = null;
  }

  private async pass(priority: CheckPriority): Promise<Result> {
    this.cancelTimer?.();
    this.cancelTimer = null;
    if (this.deps.passive?.(this.target)) return void this.schedule(this.s.confirmMs);
    let record: ProgressRecord | null;
    try {
      if (this.deps.pullWish) await this.pullWish(this.deps.pullWish);
      record = await this.deps.poll(this.target, priority);
    } catch (err) {
      return this.failed(asError(err));
    }
    if (this.closed) return undefined;
    this.outageMs = 0;
    const view = withEnergy(viewOf(record, this.target), record, this.deps.derive);
    observe(this.m, view, this.deps.clock.now(), this.s);
    if (view.kind === 'active') this.refusalShown = null;
    // One depot operation per check: hold what counts (before deciding: the depot may stop it), else ask or release after.
    const counted = view.kind !== 'unreadable' && counts(view, this.m);
    if (counted && this.deps.depot) takeYield(this.m, this.heard(await this.deps.depot.hold(this.key, holdFacts(view, this.m))), view);
    if (this.closed) return undefined;
    let decision = decide(this.m, view, this.deps.clock.now(), this.s, this.deps.mayCommand?.(this.target) ?? true);
    if (decision === null) return this.failed(new ChargingError('BAD_RESPONSE', `Progress query for ${this.target.token}: ${(view as { why: string }).why}; nothing decided on it`));
    const asked = this.wishes;
    if (!counted && this.deps.depot) decision = await this.admit(this.deps.depot, decision);
    if (this.closed) return undefined;
    // A wish came while the depot was asked: its own check decides (a START granted for the old one is not sent; its slot goes at that check).
    if (asked !== this.wishes && decision.send) decision = { state: actualState(view), reason: 'a new wish came while the depot was asked', nextMs: this.s.confirmMs };
    let error = decision.error;
    const wishes = this.wishes;
    if (decision.send) ({ decision, error } = await this.execute(decision, view));
    // A wish came while the command was on its way: the check it asked for (next) reports the state under it.
    if (wishes === this.wishes) this.show(decision, view, record);
    // The next check is armed whatever the store does: a failed write must never end the checks (and the STOPs).
    const unsaved = await this.save().then(() => undefined, asError);
    this.schedule(decision.nextMs);
    error ??= unsaved;
    this.errorShape = error ? shape(error) : null;
    return error;
  }

  /** Grant before START: the depot records the slot before the START goes, or the target queues; nothing counts otherwise (released). */
  private async admit(depot: DepotHook, decision: Decision): Promise<Decision> {
    if (decision.send?.action !== 'START') {
      this.heard(await depot.release(this.key));
      return decision;
    }
    const word = this.heard(await depot.ask(this.key, this.m.priority));
    return word.granted ? decision : queued(word, this.s.checkMs);
  }

  private heard(word: DepotWord): DepotWord {
    this.depotView = word.view ?? this.depotView;
    return word;
  }

  /** A wish sent to another replica of the fleet: applied as if it came here (and written down before anything is sent). */
  private async pullWish(pull: NonNullable<ControlDeps['pullWish']>): Promise<void> {
    const wish = await pull(this.target);
    // The number is kept with the memory (committed with the wish's effect): a new holder never applies it again.
    if (!wish || wish.seq <= this.m.wishSeq) return;
    this.m.wishSeq = wish.seq;
    if (applyWish(this.m, wish.wanted, { force: wish.force, restart: wish.restart, energyLimit: wish.energyLimit }, this.deps.clock.now(), this.s)) {
      this.wishes++;
      if (wish.restart === true) this.pressed = true;
    }
    await this.save();
  }

  /** Sends the decided command: written down first, undone if it surely was not sent. */
  private async execute(decision: Decision, view: ProgressView): Promise<{ decision: Decision; error?: ChargingError }> {
    const send = decision.send as NonNullable<Decision['send']>;
    const undo = this.undoOf(send.action);
    noteSent(this.m, send.action, this.deps.clock.now(), send.action === 'STOP' ? send.transactionId : undefined);
    let unsaved: ChargingError | undefined;
    try {
      await this.save();
    } catch (err) {
      unsaved = asError(err);
      // Not kept, so not sent: a START never sent neither uses an attempt nor waits.
      // A STOP goes all the same: sent twice after a crash it is harmless; held back, the car charges on.
      if (send.action === 'START') {
        undo();
        return { decision: { state: actualState(view), reason: `START not sent: ${unsaved.message}`, nextMs: this.s.checkMs }, error: unsaved };
      }
    }
    if (this.closed) {
      undo();
      await this.save().catch(() => undefined);
      return { decision };
    }
    const t = this.target;
    const command = send.action === 'START' ? startCommand(t) : stopCommand({ ...t, transactionId: send.transactionId });
    try {
      // Fenced: a replica whose lease on the target lapsed while the command queued in the client does not send it.
      const mayCommand = this.deps.mayCommand;
      await this.deps.send(command, mayCommand && (() => mayCommand(t)));
      if (send.action === 'START') this.m.busy = false;
      return { decision, error: unsaved };
    } catch (err) {
      const e = asError(err);
      if (mayHaveActed(e, send.action)) return { decision: { ...decision, reason: `${decision.reason}; its answer was lost (${e.message}): waiting for progress to show it` } };
      if (send.action === 'START' && e.code === 'HTTP') return this.refused(e);
      undo();
      if (e.code === 'CLOSED') return { decision: { ...decision, state: actualState(view), reason: `${send.action} not sent: the node closed`, send: undefined } };
      return { decision: { state: actualState(view), reason: `${send.action} not sent: ${e.message}`, nextMs: this.s.checkMs }, error: e };
    }
  }

  /**
   * Puts back what noteSent changed, for a command surely not sent. A wish
   * taken meanwhile began its own round: only the command goes then, never
   * the new wish's attempts or force.
   */
  private undoOf(action: Action): () => void {
    const m = this.m;
    const before = { command: m.command, round: m.round, attempts: m.attempts, last: m.last, force: m.force, starts: m.starts };
    const wishes = this.wishes;
    return () => {
      if (m.command?.action === action) m.command = before.command;
      m.last = before.last;
      m.starts = before.starts;
      if (wishes === this.wishes) Object.assign(m, { round: before.round, attempts: before.attempts, force: before.force });
    };
  }

  /**
   * The service refused START: nothing was started, and the same START would be
   * refused again until the retry. 409 is a connector busy with another
   * session: state busy, reported once per episode; another refusal is
   * reported once while it stays the same (not at every retry).
   */
  private refused(e: ChargingError): { decision: Decision; error?: ChargingError } {
    const busy = e.statusCode === 409;
    const reported = (busy && this.m.busy) || (!busy && this.refusalShown === shape(e));
    if (!busy) this.refusalShown = shape(e);
    this.m.command = null;
    this.m.busy = this.m.busy || busy;
    const reason = busy ? `the connector is busy (the service answered 409: ${e.message})` : `the service refused START: ${e.message}`;
    this.m.failed = { action: 'START', reason, at: this.deps.clock.now(), ...(busy ? { busy: true } : {}) };
    const retry = this.s.retryMs > 0 ? Math.min(this.s.checkMs, this.s.retryMs) : this.s.checkMs;
    return { decision: { state: busy ? 'busy' : 'failed', reason, nextMs: retry }, error: reported ? undefined : e };
  }

  /**
   * A check that could not read progress: the state stays as it was. Checks
   * back off, doubling from checkInterval to ten times it, and only the first
   * failure of the outage is reported.
   */
  private failed(err: ChargingError): Result {
    if (this.closed || err.code === 'CLOSED') return undefined;
    this.deps.depot?.unread(this.key);
    const first = this.outageMs === 0;
    this.outageMs = first ? this.s.checkMs : Math.min(this.outageMs * 2, 10 * this.s.checkMs);
    if (!first) this.quiet.add(err);
    this.schedule(this.outageMs);
    const last = this.last;
    // The output after a wish describes the wish in force, even when nothing can be read.
    if (last && last.wanted !== this.m.wanted) this.show({ state: last.state, reason: `progress cannot be read (${err.message}): the wish is carried out once it can be`, nextMs: this.outageMs }, { kind: 'unreadable', why: err.message }, null);
    this.errorShape = shape(err);
    return err;
  }

  private show(decision: Decision, view: ProgressView, record: ProgressRecord | null): void {
    const session = record && (view.kind === 'active' || view.kind === 'pending') ? deriveSession(record, this.deps.derive) : null;
    const snapshot: ControlSnapshot = { target: this.target, state: decision.state, wanted: this.m.wanted, reason: decision.reason, session, attempt: decision.attempt, guardLeftMs: decision.guardLeftMs, startInMs: decision.startInMs, ...(this.deps.depot ? { depot: this.depotView } : {}), at: this.deps.clock.now() };
    this.last = snapshot;
    const shown = `${decision.state}|${String(this.m.wanted)}`;
    // A restart pressed while the bound on STARTs holds the START back leaves the state as it was: it is answered all the same.
    const changed = shown !== this.m.shown || this.pressed;
    this.pressed = false;
    this.m.shown = shown;
    this.deps.onState(snapshot, changed);
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    this.cancelTimer?.();
    this.cancelTimer = this.deps.clock.after(Math.max(MIN_CHECK_MS, ms), () => {
      this.cancelTimer = null;
      const before = this.errorShape;
      void this.check('poll').then((err) => {
        // A timer's check has nobody to answer: its failure goes to onError, once per streak.
        if (err && !this.quiet.has(err) && shape(err) !== before) this.deps.onError(this.target, err);
      });
    });
  }

  /** Writes the memory if it changed since the last write; resolves when the store has it. */
  private async save(): Promise<void> {
    const kept = toKept(this.target, this.m, { now: this.deps.clock.now(), wall: this.deps.clock.wall() });
    // Times aside: a check that changed nothing writes nothing.
    const text = JSON.stringify({ ...kept, command: this.m.command, failed: this.m.failed, last: this.m.last });
    if (text === this.savedText) return;
    await this.deps.store.save(this.key, kept);
    // Only once the store has it: a failed write is written again next time.
    this.savedText = text;
  }
}

/** The view with the session's energy (for the energy limit), derived as the progress node derives it. */
function withEnergy(view: ProgressView, record: ProgressRecord | null, derive?: DeriveOptions): ProgressView {
  if (view.kind !== 'active' || !record) return view;
  const kwh = deriveSession(record, derive).energyKWh;
  return kwh === null ? view : { ...view, energyKWh: kwh };
}

/** An error's kind, for "once per streak": numbers do not make a new one. */
function shape(err: ChargingError): string {
  return `${err.code}:${err.message.replace(/\d+(\.\d+)?/g, '#')}`;
}
