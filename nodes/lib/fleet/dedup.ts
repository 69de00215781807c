/**
 * The same START or STOP sent once by the fleet.
 *
 * An inject or a schedule runs on every replica, so every replica produces the
 * same command at nearly the same moment. A command is "the same" when its
 * action, token, location and connector (evseId) are; it is a duplicate while
 * the first one is being sent and for `windowMs` after its outcome.
 *
 * Design:
 * 1. Claim: `SET cmd:<digest> "<replica id>\n" NX PX (sendMs + windowMs)`.
 *    The replica whose SET succeeds is the sender; the claim outlives the
 *    longest send (the client's whole deadline), so it cannot lapse while the
 *    command is on its way and let a second replica send it too.
 * 2. The sender sends, then publishes the outcome under the claim key (Lua:
 *    only while the claim is its own), as "<replica id>\n<outcome JSON>",
 *    kept windowMs. The outcome is what the sender's flow got: the result,
 *    or the error as plain data (ChargingError.toJSON: no secrets).
 * 3. Every other replica is a duplicate: it does not send, and reads the
 *    claim (25 ms, doubling to 200 ms) until the outcome is there, until its
 *    own deadline, or until the claim is gone. It then tells its flow either
 *    the sender's outcome (`duplicate`) or a clear marker (`unknown`: the
 *    sender did not report in time, or stopped; the command may have been
 *    sent, so a START/STOP is OUTCOME_UNKNOWN, never retried from here).
 * 4. Redis unreachable when claiming: `unavailable`. The caller sends without
 *    deduplication and warns (a command must not be lost because Redis is).
 *
 * A STOP repeated by "make sure it ends" is not a duplicate: only the first
 * STOP goes through claim(); its repeats are the sender's own business.
 */
import { ChargingError } from '../errors';
import { monotonicNow } from '../clock';
import type { FleetConnection } from './connection';
import { digestOf, type FleetKeys } from './keys';
import { COMMAND_PUBLISH } from './scripts';

export interface FleetCommand {
  action: 'START' | 'STOP';
  token: string;
  locationId: string;
  evseId: string | number;
}

/** What the sender publishes: plain JSON, nothing secret. */
export type CommandOutcome<T> = { ok: true; result: T } | { ok: false; error: Record<string, unknown> };

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
  now?: () => number;
}

export interface DedupContext {
  connection: FleetConnection;
  keys: FleetKeys;
  replicaId: string;
}

export class CommandDedup {
  readonly windowMs: number;
  readonly sendMs: number;
  private readonly now: () => number;

  constructor(
    private readonly ctx: DedupContext,
    options: DedupOptions = {},
  ) {
    this.windowMs = options.windowMs ?? 2_000;
    this.sendMs = options.sendMs ?? 60_000;
    this.now = options.now ?? monotonicNow;
  }

  /** The claim key's digest for a command: the four fields that make it "the same". */
  static digest(cmd: FleetCommand): string {
    return digestOf([cmd.action, cmd.token, cmd.locationId, String(cmd.evseId)]);
  }

  /**
   * Claims the command for this replica, or waits (at most waitMs) for the
   * outcome of the replica that did. Never throws.
   */
  async claim<T>(cmd: FleetCommand, waitMs: number, sendMs: number = this.sendMs): Promise<Claim<T>> {
    const key = this.ctx.keys.command(CommandDedup.digest(cmd));
    const me = this.ctx.replicaId;
    let got: string | null;
    try {
      got = await this.ctx.connection.run('claiming a command', (r) => r.set(key, `${me}\n`, 'PX', Math.max(sendMs, this.sendMs) + this.windowMs, 'NX'));
    } catch (err) {
      return { role: 'unavailable', error: this.ctx.connection.toError(err, 'claiming a command') };
    }
    if (got === 'OK') return { role: 'sender', publish: (outcome) => this.publish(key, outcome) };
    return this.awaitOutcome<T>(key, this.now() + Math.max(0, waitMs));
  }

  /**
   * claim() and the send in one: `send` runs on the replica that claimed the
   * command (or on this one without deduplication when Redis is away, after
   * onUnguarded); its outcome is published for the others.
   */
  async run<T>(cmd: FleetCommand, send: () => Promise<T>, waitMs: number, onUnguarded?: (err: ChargingError) => void, sendMs?: number): Promise<RunResult<T>> {
    const claim = await this.claim<T>(cmd, waitMs, sendMs);
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

  private async publish<T>(key: string, outcome: CommandOutcome<T>): Promise<void> {
    try {
      await this.ctx.connection.eval(COMMAND_PUBLISH, [key], [this.ctx.replicaId, JSON.stringify(outcome), this.windowMs]);
    } catch {
      // The duplicates time out with a clear marker; the sender's own flow has its outcome.
    }
  }

  private async awaitOutcome<T>(key: string, deadline: number): Promise<Claim<T>> {
    let pause = 25;
    let from: string | null = null;
    for (;;) {
      let value: string | null;
      try {
        value = await this.ctx.connection.run('waiting for a command outcome', (r) => r.get(key));
      } catch (err) {
        const message = `The same command was claimed by ${from ?? 'another replica'}, and Redis could not be asked for its outcome: ${this.ctx.connection.toError(err, 'command outcome').message}`;
        return { role: 'unknown', from, reason: 'redis-unavailable', message };
      }
      if (value === null) {
        return { role: 'unknown', from, reason: 'sender-gone', message: `The same command was claimed by ${from ?? 'another replica'}, which gave no outcome before its claim lapsed; it may have been sent` };
      }
      const nl = value.indexOf('\n');
      from = value.slice(0, nl);
      const json = value.slice(nl + 1);
      if (json !== '') {
        const outcome = parseOutcome<T>(json);
        if (outcome) return { role: 'duplicate', from, outcome };
      }
      const left = deadline - this.now();
      if (left <= 0) {
        return { role: 'unknown', from, reason: 'timeout', message: `The same command is being sent by ${from}; its outcome did not arrive in time (it may have been sent)` };
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      pause = Math.min(200, pause * 2);
    }
  }
}

export type RunResult<T> =
  | { role: 'sent'; deduplicated: boolean; result: T }
  | { role: 'duplicate'; from: string; outcome: CommandOutcome<T> }
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string };

function parseOutcome<T>(json: string): CommandOutcome<T> | null {
  try {
    const v = JSON.parse(json) as CommandOutcome<T>;
    return v && typeof v === 'object' && typeof v.ok === 'boolean' ? v : null;
  } catch {
    return null;
  }
}
