/**
 * The same START or STOP sent once by the fleet.
 *
 * An inject or a schedule runs on every replica, so every replica produces the
 * same command at nearly the same moment. A command is "the same" when its
 * action, token, location and connector (evseId) are; it is a duplicate while
 * the first one is being sent and for `windowMs` after its outcome.
 *
 * Design:
 * 1. Claim (Lua, COMMAND_CLAIM): the key `cmd:<digest>` takes
 *    "<attempt>:<replica id>\n" for sendMs + windowMs, a random attempt id per
 *    claim, unless it holds a claim or a recent outcome. The replica whose
 *    claim lands is the sender; the claim outlives the longest send (the
 *    client's whole deadline), so it cannot lapse while the command is on its
 *    way and let a second replica send it too.
 * 2. A claim whose answer never came (a reply lost to a reconnect, a timeout
 *    during a write pause: it may have run) is the same call again: it reads
 *    back our attempt id (we are the sender), another's (duplicate), or
 *    claims. Retried until Redis answers, within the claim's budget
 *    (readBackMs, at most the message's wait). Nothing is re-sent blindly
 *    (the connection does not resend unanswered commands).
 * 3. The sender sends, then publishes the outcome under the claim key (Lua:
 *    only while the claim is its own) with the time on Redis's clock, kept
 *    windowMs + readBackMs: a replica whose claim was held up by a fault still
 *    finds the outcome of the send it raced with, while a claim first tried
 *    more than windowMs after the outcome is a new command. The outcome is
 *    what the sender's flow got: the result, or the error as plain data
 *    (ChargingError.toJSON: no secrets).
 * 4. Every other replica is a duplicate: it does not send, and reads the
 *    claim (25 ms, doubling to 200 ms) until the outcome is there, until its
 *    own deadline, or until the claim is gone. A STOP's duplicates read it
 *    through the claim script: if the claimer left the fleet without an
 *    outcome (killed before sending), the first of them to ask once the
 *    claim is old enough (takeOverAfterMs) takes it over and sends (a STOP
 *    that did not stop is worse than one sent twice); a START's never do.
 *    Otherwise it tells its flow either
 *    the sender's outcome (`duplicate`) or a clear marker (`unknown`: the
 *    sender did not report in time, or stopped; the command may have been
 *    sent, so a START/STOP is OUTCOME_UNKNOWN, never retried from here).
 * 5. `unavailable` (the caller sends without deduplication and warns: a
 *    command must not be lost because Redis is) only when Redis stayed away
 *    for the whole claim budget, or was already known down for longer than
 *    that when the command came (then at once: no wait added per command
 *    during an outage).
 *
 * A STOP repeated by "make sure it ends" is not a duplicate: only the first
 * STOP goes through claim(); its repeats are the sender's own business.
 */
import { randomBytes } from 'node:crypto';
import { ChargingError } from '../errors';
import { monotonicNow } from '../clock';
import type { FleetConnection } from './connection';
import { digestOf, type FleetKeys } from './keys';
import { COMMAND_CLAIM, COMMAND_PUBLISH } from './scripts';
import { DownTimer } from './down-timer';
import type { CommandOutcome, CommandRun } from '../coordination/coordination';

export interface FleetCommand {
  action: 'START' | 'STOP';
  token: string;
  locationId: string;
  evseId: string | number;
}

/** What the sender publishes: plain JSON, nothing secret. */

export type Claim<T> =
  /** this replica sends; then it must call publish (once), success or not */
  | { role: 'sender'; publish(outcome: CommandOutcome<T>): Promise<void> }
  /** another replica sent it: its outcome */
  | { role: 'duplicate'; from: string; outcome: CommandOutcome<T> }
  /** another replica claimed it, and no outcome came in time: it may have been sent */
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string }
  /** Redis could not be asked: send without deduplication, and warn */
  | { role: 'unavailable'; error: ChargingError };

export interface DedupOptions {
  /** how long a command's outcome answers its duplicates (default 2 s) */
  windowMs?: number;
  /** the longest a send may take, the client's whole deadline included (default 60 s) */
  sendMs?: number;
  /** how long a claim Redis did not answer is tried and read back before the command goes out unguarded (default 10 s) */
  readBackMs?: number;
  now?: () => number;
}

export interface DedupContext {
  connection: FleetConnection;
  keys: FleetKeys;
  replicaId: string;
  /**
   * How old a STOP's claim without outcome must be before it is taken over
   * from a claimer missing from the fleet's members (default: the read-back
   * time): long enough for a live claimer to be back among them, a lease and
   * after Redis lost its data a reconnection (the members were lost too).
   */
  takeOverAfterMs?: number;
  /**
   * True while this replica gets no answers from the service where a peer
   * does (service-reach.ts): its claims wait deferMs first, so that a healthy
   * peer given the same command claims it (default: never).
   */
  defer?: () => boolean;
}

/** How long a replica that cannot reach the service lets a healthy peer claim a command first. */
export const DEFER_MS = 1_000;

export class CommandDedup {
  readonly windowMs: number;
  readonly sendMs: number;
  readonly readBackMs: number;
  /** how old a STOP's claim must be before it is taken over from a claimer that left (DedupContext) */
  readonly takeOverAfterMs: number;
  private readonly now: () => number;
  private readonly down: DownTimer;
  private readonly defer: () => boolean;

  constructor(
    private readonly ctx: DedupContext,
    options: DedupOptions = {},
  ) {
    this.windowMs = options.windowMs ?? 2_000;
    this.sendMs = options.sendMs ?? 60_000;
    this.readBackMs = options.readBackMs ?? 10_000;
    this.takeOverAfterMs = ctx.takeOverAfterMs ?? this.readBackMs;
    this.now = options.now ?? monotonicNow;
    this.down = new DownTimer(ctx.connection, this.now);
    this.defer = ctx.defer ?? (() => false);
  }

  /** The claim key's digest for a command: the four fields that make it "the same". */
  static digest(cmd: FleetCommand): string {
    return digestOf([cmd.action, cmd.token, cmd.locationId, String(cmd.evseId)]);
  }

  /**
   * Claims the command for this replica, or waits (at most waitMs) for the
   * outcome of the replica that did. Never throws.
   */
  claim<T>(cmd: FleetCommand, waitMs: number, sendMs: number = this.sendMs): Promise<Claim<T>> {
    return this.claimAt<T>(this.ctx.keys.command(CommandDedup.digest(cmd)), cmd.action === 'STOP', waitMs, sendMs, this.windowMs);
  }

  /**
   * Claims any key (see claim): `takeOver` when a claim whose claimer left
   * the fleet without an outcome may be taken over (a STOP), `windowMs` how
   * long the outcome answers the same key. Never throws.
   */
  async claimAt<T>(key: string, takeOver: boolean, waitMs: number, sendMs: number, windowMs: number): Promise<Claim<T>> {
    const claimant = `${randomBytes(8).toString('hex')}:${this.ctx.replicaId}`;
    const ttlMs = Math.max(sendMs, this.sendMs) + windowMs;
    const start = this.now();
    const deadline = start + Math.min(this.readBackMs, Math.max(0, waitMs));
    if (this.down.down && this.down.downForMs() >= this.readBackMs) {
      return { role: 'unavailable', error: this.down.error() };
    }
    if (this.defer()) await new Promise((r) => setTimeout(r, Math.min(DEFER_MS, Math.max(0, waitMs) / 4)));
    // The same call claims, and reads back a try whose answer never came: ours, another's, or claimed now.
    // A STOP whose claimer left the fleet without publishing is claimed anew (twice is harmless) once this replica
    // has seen the claimer missing from the live replicas for takeOverAfterMs on its own clock, and the claim is
    // that old: one look is not enough (right after a write pause every membership has lapsed until its next
    // heartbeat). A START waits for its claim to lapse.
    const minAge = this.takeOverAfterMs;
    let missingSince: number | null = null;
    const tryClaim = async (): Promise<Held | 'mine'> => {
      const takeOverNow = takeOver && missingSince !== null && this.now() - missingSince >= minAge ? '1' : '0';
      const got = await this.ctx.connection.eval(COMMAND_CLAIM, [key, this.ctx.keys.replicas], [claimant, ttlMs, Math.round(this.now() - start), windowMs, takeOverNow, minAge]);
      if (got === 'OK') return 'mine';
      const [value, alive] = got as [string, number];
      if (Number(alive) === 1) missingSince = null;
      else missingSince ??= this.now();
      const held = parseHeld(String(value));
      return held.claimant === claimant ? 'mine' : held;
    };
    let lastError: ChargingError | null = null;
    for (let pause = 25; ; pause = Math.min(400, pause * 2)) {
      try {
        if ((await tryClaim()) === 'mine') return this.sender(key, claimant, windowMs);
        // A STOP's duplicates keep asking the claim itself: if its claimer dies before sending, one of them takes it over and sends.
        const watch = takeOver ? tryClaim : () => this.read(key);
        return this.awaitOutcome<T>(key, claimant, watch, start + Math.max(0, waitMs), windowMs);
      } catch (err) {
        lastError = this.ctx.connection.toError(err, 'claiming a command');
        if (lastError.code === 'CLOSED' || lastError.code === 'CONFIG') return { role: 'unavailable', error: lastError };
      }
      const left = deadline - this.now();
      if (left <= 0) return { role: 'unavailable', error: lastError };
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
    }
  }

  /**
   * claim() and the send in one: `send` runs on the replica that claimed the
   * command (or on this one without deduplication when Redis is away, after
   * onUnguarded); its outcome is published for the others.
   */
  run<T>(cmd: FleetCommand, send: () => Promise<T>, waitMs: number, onUnguarded?: (err: ChargingError) => void, sendMs?: number): Promise<CommandRun<T>> {
    return this.runClaim(this.claim<T>(cmd, waitMs, sendMs), send, onUnguarded);
  }

  /** claimAt() and the work in one, as run(). */
  runAt<T>(key: string, takeOver: boolean, work: () => Promise<T>, waitMs: number, sendMs: number, windowMs: number, onUnguarded?: (err: ChargingError) => void): Promise<CommandRun<T>> {
    return this.runClaim(this.claimAt<T>(key, takeOver, waitMs, sendMs, windowMs), work, onUnguarded);
  }

  private async runClaim<T>(claiming: Promise<Claim<T>>, send: () => Promise<T>, onUnguarded?: (err: ChargingError) => void): Promise<CommandRun<T>> {
    const claim = await claiming;
    if (claim.role === 'duplicate' || claim.role === 'unknown') return claim;
    if (claim.role === 'unavailable') {
      onUnguarded?.(claim.error);
      return { role: 'sent', deduplicated: false, result: await send() };
    }
    let result: T;
    try {
      result = await send();
    } catch (err) {
      const error = err instanceof ChargingError ? err.toJSON() : { name: 'Error', code: 'INTERNAL', message: String((err as Error)?.message ?? err) };
      await claim.publish({ ok: false, error });
      throw err;
    }
    await claim.publish({ ok: true, result });
    return { role: 'sent', deduplicated: true, result };
  }

  private sender<T>(key: string, claimant: string, windowMs: number): Claim<T> {
    return { role: 'sender', publish: (outcome) => this.publish(key, claimant, outcome, windowMs) };
  }

  private async read(key: string): Promise<Held | null> {
    const value = await this.ctx.connection.run('reading a command claim', (r) => r.get(key));
    return value === null ? null : parseHeld(value);
  }

  /** Publishing is idempotent (the same value under the same claim): retried while Redis does not answer, within readBackMs. */
  private async publish<T>(key: string, claimant: string, outcome: CommandOutcome<T>, windowMs: number): Promise<void> {
    const deadline = this.now() + this.readBackMs;
    for (let pause = 50; ; pause = Math.min(400, pause * 2)) {
      try {
        await this.ctx.connection.eval(COMMAND_PUBLISH, [key], [claimant, JSON.stringify(outcome), windowMs + this.readBackMs]);
        return;
      } catch (err) {
        const left = deadline - this.now();
        // The duplicates time out with a clear marker; the sender's own flow has its outcome.
        if (this.ctx.connection.toError(err, 'publish').code === 'CLOSED' || left <= 0) return;
        await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      }
    }
  }

  /** Reads the claim (`watch`) until the sender's outcome is there, the claim is gone or ours (a STOP taken over), or the deadline. */
  private async awaitOutcome<T>(key: string, claimant: string, watch: () => Promise<Held | 'mine' | null>, deadline: number, windowMs: number): Promise<Claim<T>> {
    let pause = 25;
    let from: string | null = null;
    let lastError: ChargingError | null = null;
    for (;;) {
      let held: Held | null | undefined;
      try {
        const got = await watch();
        if (got === 'mine') return this.sender(key, claimant, windowMs);
        held = got;
        lastError = null;
      } catch (err) {
        // A lost answer or a reconnect: asked again until the deadline (undefined: not known).
        lastError = this.ctx.connection.toError(err, 'command outcome');
      }
      if (held === null) {
        return { role: 'unknown', from, reason: 'sender-gone', message: `The same command was claimed by ${from ?? 'another replica'}, which gave no outcome before its claim lapsed; it may have been sent` };
      }
      if (held) {
        from = held.from;
        if (held.outcome) return { role: 'duplicate', from, outcome: held.outcome as CommandOutcome<T> };
      }
      const left = deadline - this.now();
      if (left <= 0 || lastError?.code === 'CLOSED') {
        if (lastError) {
          const message = `The same command was claimed by ${from ?? 'another replica'}, and Redis could not be asked for its outcome: ${lastError.message}`;
          return { role: 'unknown', from, reason: 'redis-unavailable', message };
        }
        return { role: 'unknown', from, reason: 'timeout', message: `The same command is being sent by ${from}; its outcome did not arrive in time (it may have been sent)` };
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      pause = Math.min(200, pause * 2);
    }
  }
}

/** A claim as Redis holds it: "<attempt>:<replica id>\n" while sending, "… <ms> <outcome JSON>" after the newline once published. */
interface Held {
  claimant: string;
  /** the claiming replica's id */
  from: string;
  outcome: CommandOutcome<unknown> | null;
}

function parseHeld(value: string): Held {
  const nl = value.indexOf('\n');
  const claimant = nl < 0 ? value : value.slice(0, nl);
  const colon = claimant.indexOf(':');
  const published = nl < 0 ? '' : value.slice(nl + 1);
  // "<ms on Redis's clock> <outcome JSON>"
  const json = published.slice(published.indexOf(' ') + 1);
  return { claimant, from: claimant.slice(colon + 1), outcome: json === '' ? null : parseOutcome(json) };
}

function parseOutcome<T>(json: string): CommandOutcome<T> | null {
  try {
    const v = JSON.parse(json) as CommandOutcome<T>;
    return v && typeof v === 'object' && typeof v.ok === 'boolean' ? v : null;
  } catch {
    return null;
  }
}
