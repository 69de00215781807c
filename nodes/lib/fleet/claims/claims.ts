/**
 * Claims through Redis: work done once per key by the fleet, its outcome
 * published for the replicas that asked for the same key (the seam's
 * `claims`, nodes/lib/coordination/claims.ts; docs/fleet.md, "Claims"). An
 * inject or a schedule runs on every replica, so every replica produces the
 * same START at nearly the same moment: its key is its action, token,
 * location and connector, and it is a duplicate while the first one is being
 * sent and for `windowMs` after its outcome.
 *
 * 1. Claim (CLAIM): the key takes "<attempt>:<replica id>\n" for workMs +
 *    windowMs, a random attempt id per claim, unless it holds a claim or a
 *    recent outcome. The replica whose claim lands runs the work; the claim
 *    outlives the longest work (the client's whole deadline), so it cannot
 *    lapse while a command is on its way and let a second replica send it too.
 * 2. A claim whose answer never came (a reply lost to a reconnect, a timeout
 *    during a write pause: it may have run) is the same call again: it reads
 *    back our attempt id (ours), another's (duplicate), or claims. Retried
 *    until Redis answers, within readBackMs (at most the caller's wait).
 *    Nothing is re-sent blindly (the connection does not resend unanswered
 *    commands).
 * 3. The claimer runs the work, then publishes the outcome under the claim
 *    (PUBLISH: only while the claim is its own) with the time on Redis's clock,
 *    kept windowMs + readBackMs: a replica whose claim was held up by a fault
 *    still finds the outcome of the work it raced with, while a claim first
 *    tried more than windowMs after the outcome is new work. The outcome is
 *    plain data (ChargingError.toJSON for a failure: no secrets).
 * 4. Every other replica is a duplicate: it runs nothing, and looks at the
 *    claim until the outcome is there, its own deadline, or the claim is gone.
 *    When the caller's policy allows it (a STOP: twice is harmless, never is
 *    not), a duplicate looks through the claim script itself, and if the
 *    claimer left the fleet without an outcome (killed before sending), the
 *    first to ask once it has seen the claimer missing for takeOverAfterMs
 *    takes the claim over and runs the work. Otherwise it gets `unknown`.
 * 5. `unavailable` (the caller runs the work without a claim and warns: a
 *    command must not be lost because Redis is) only when Redis stayed away
 *    for the whole read-back time, or was already known down for longer than
 *    that (then at once: no wait added per command during an outage).
 * 6. A replica that gets no answers from the service where a peer does
 *    (service-reach.ts) waits DEFER_MS before it claims, so that a healthy
 *    peer given the same command claims it first.
 */
import { randomBytes } from 'node:crypto';
import { monotonicNow } from '../../clock';
import type { ClaimOutcome, ClaimPolicy, ClaimRun, Claims } from '../../coordination/claims';
import { ChargingError } from '../../errors';
import type { FleetConnection } from '../redis/connection';
import { digestOf, type FleetKeys } from '../redis/keys';
import { Backoff, LOOK, RETRY, sleep } from '../redis/retry';
import { CLAIM, PUBLISH } from './claim-scripts';

export type Claim<T> =
  /** this replica runs the work; then it must call publish (once), success or not */
  | { role: 'sender'; publish(outcome: ClaimOutcome<T>): Promise<void> }
  /** another replica ran it: its outcome */
  | { role: 'duplicate'; from: string; outcome: ClaimOutcome<T> }
  /** another replica claimed it, and no outcome came in time: it may have run */
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string }
  /** Redis could not be asked: run without a claim, and warn */
  | { role: 'unavailable'; error: ChargingError };

export interface ClaimOptions {
  /** how long an outcome answers the same key (default 2 s) */
  windowMs?: number;
  /** the shortest time a claim outlives its work (default 60 s) */
  sendMs?: number;
  /** how long a claim Redis did not answer is tried and read back before the work runs unguarded (default 10 s) */
  readBackMs?: number;
  now?: () => number;
}

export interface ClaimContext {
  connection: FleetConnection;
  keys: FleetKeys;
  replicaId: string;
  /**
   * How old a claim without outcome must be before it is taken over from a
   * claimer missing from the fleet's members (default: the read-back time):
   * long enough for a live claimer to be back among them, a lease and after
   * Redis lost its data a reconnection (the members were lost too).
   */
  takeOverAfterMs?: number;
  /** true while this replica gets no answers from the service where a peer does: its claims wait DEFER_MS first */
  defer?: () => boolean;
  /** Redis's time at least, on its clock, at this replica's monotonic ms (from the last heartbeat's answer; null: none yet) */
  redisTimeAt?: (monotonicMs: number) => number | null;
}

/** How long a replica that cannot reach the service lets a healthy peer claim a command first. */
export const DEFER_MS = 1_000;

/** What a claim's work may wait for, per call. */
export interface ClaimCall {
  /** a claim whose claimer left the fleet may be taken over */
  takeOver: boolean;
  /** the caller's wait for another's outcome (and the read-back's bound) */
  waitMs: number;
  /** the longest the work may take (the claim outlives it) */
  workMs?: number;
  windowMs?: number;
}

export class RedisClaims implements Claims {
  readonly windowMs: number;
  readonly sendMs: number;
  readonly readBackMs: number;
  readonly takeOverAfterMs: number;
  private readonly now: () => number;
  private readonly defer: () => boolean;

  constructor(
    private readonly ctx: ClaimContext,
    options: ClaimOptions = {},
  ) {
    this.windowMs = options.windowMs ?? 2_000;
    this.sendMs = options.sendMs ?? 60_000;
    this.readBackMs = options.readBackMs ?? 10_000;
    this.takeOverAfterMs = ctx.takeOverAfterMs ?? this.readBackMs;
    this.now = options.now ?? monotonicNow;
    this.defer = ctx.defer ?? (() => false);
  }

  /** The seam's claims: the claim outlives the whole work, and the others wait as long for its outcome. */
  async run<T>(key: readonly string[], work: () => Promise<T>, policy: ClaimPolicy, unshared: (err: ChargingError) => void): Promise<ClaimRun<T>> {
    const claim = await this.claim<T>(key, { takeOver: policy.takeOver === 'when-claimer-gone', waitMs: policy.workMs, workMs: policy.workMs, windowMs: policy.windowMs });
    if (claim.role === 'duplicate' || claim.role === 'unknown') return claim;
    if (claim.role === 'unavailable') {
      unshared(claim.error);
      return { role: 'ran', shared: false, result: await work() };
    }
    let result: T;
    try {
      result = await work();
    } catch (err) {
      const error = err instanceof ChargingError ? err.toJSON() : { name: 'Error', code: 'INTERNAL', message: String((err as Error)?.message ?? err) };
      await claim.publish({ ok: false, error });
      throw err;
    }
    await claim.publish({ ok: true, result });
    return { role: 'ran', shared: true, result, by: this.ctx.replicaId };
  }

  /** Claims the key for this replica, or waits (at most waitMs) for the outcome of the replica that did. Never throws. */
  async claim<T>(key: readonly string[], call: ClaimCall): Promise<Claim<T>> {
    const at = this.ctx.keys.claim(digestOf([...key]));
    const windowMs = call.windowMs ?? this.windowMs;
    const claimant = `${randomBytes(8).toString('hex')}:${this.ctx.replicaId}`;
    const ttlMs = Math.max(call.workMs ?? this.sendMs, this.sendMs) + windowMs;
    const start = this.now();
    const deadline = start + Math.min(this.readBackMs, Math.max(0, call.waitMs));
    const health = this.ctx.connection.healthState;
    if (health.knownDown && health.downForMs() >= this.readBackMs) return { role: 'unavailable', error: health.error() };
    if (this.defer()) await sleep(Math.min(DEFER_MS, Math.max(0, call.waitMs) / 4));
    // A claim whose claimer left the fleet without publishing is claimed anew (when the policy allows) once this
    // replica has seen the claimer missing from the live replicas for takeOverAfterMs on its own clock, and the claim
    // is that old: one look is not enough (right after a write pause every membership has lapsed until its next
    // heartbeat). Otherwise it waits for the claim to lapse.
    const minAge = this.takeOverAfterMs;
    let missingSince: number | null = null;
    const tryClaim = async (): Promise<Held | 'mine'> => {
      const takeOverNow = call.takeOver && missingSince !== null && this.now() - missingSince >= minAge ? '1' : '0';
      const firstAt = this.ctx.redisTimeAt?.(start) ?? null;
      const args = { claimant, claimMs: ttlMs, sinceFirstMs: Math.round(this.now() - start), firstAtLeastMs: firstAt === null ? '' : Math.floor(firstAt), windowMs, takeOver: takeOverNow, minAgeMs: minAge };
      const got = await this.ctx.connection.eval(CLAIM.call({ claim: at, replicas: this.ctx.keys.replicas }, args));
      if (got === 'OK') return 'mine';
      const [value, alive] = got as [string, number];
      if (Number(alive) === 1) missingSince = null;
      else missingSince ??= this.now();
      const held = parseHeld(String(value));
      return held.claimant === claimant ? 'mine' : held;
    };
    const backoff = new Backoff(RETRY);
    let lastError: ChargingError | null = null;
    for (;;) {
      try {
        if ((await tryClaim()) === 'mine') return this.sender(at, claimant, windowMs);
        // With a takeover allowed, the duplicates keep asking the claim itself: if its claimer dies first, one of them takes it over.
        const watch = call.takeOver ? tryClaim : () => this.read(at);
        return this.awaitOutcome<T>(at, claimant, watch, start + Math.max(0, call.waitMs), windowMs);
      } catch (err) {
        lastError = this.ctx.connection.toError(err, 'claiming a command');
        if (lastError.code === 'CLOSED' || lastError.code === 'CONFIG') return { role: 'unavailable', error: lastError };
      }
      const left = deadline - this.now();
      if (left <= 0) return { role: 'unavailable', error: lastError };
      await sleep(Math.min(backoff.next(), left));
    }
  }

  private sender<T>(key: string, claimant: string, windowMs: number): Claim<T> {
    return { role: 'sender', publish: (outcome) => this.publish(key, claimant, outcome, windowMs) };
  }

  private async read(key: string): Promise<Held | null> {
    const value = await this.ctx.connection.run('reading a command claim', (r) => r.get(key));
    return value === null ? null : parseHeld(value);
  }

  /** Publishing is idempotent (the same value under the same claim): retried while Redis does not answer, within readBackMs. */
  private async publish<T>(key: string, claimant: string, outcome: ClaimOutcome<T>, windowMs: number): Promise<void> {
    const deadline = this.now() + this.readBackMs;
    const backoff = new Backoff(RETRY);
    for (;;) {
      try {
        await this.ctx.connection.eval(PUBLISH.call({ claim: key }, { claimant, outcome: JSON.stringify(outcome), keepMs: windowMs + this.readBackMs }));
        return;
      } catch (err) {
        const left = deadline - this.now();
        // The duplicates time out with a clear marker; the claimer's own flow has its outcome.
        if (this.ctx.connection.toError(err, 'publish').code === 'CLOSED' || left <= 0) return;
        await sleep(Math.min(backoff.next(), left));
      }
    }
  }

  /** Looks at the claim (`watch`) until the outcome is there, the claim is gone or ours (taken over), or the deadline. */
  private async awaitOutcome<T>(key: string, claimant: string, watch: () => Promise<Held | 'mine' | null>, deadline: number, windowMs: number): Promise<Claim<T>> {
    const backoff = new Backoff(LOOK);
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
        if (held.outcome) return { role: 'duplicate', from, outcome: held.outcome as ClaimOutcome<T> };
      }
      const left = deadline - this.now();
      if (left <= 0 || lastError?.code === 'CLOSED') {
        if (lastError) {
          const message = `The same command was claimed by ${from ?? 'another replica'}, and Redis could not be asked for its outcome: ${lastError.message}`;
          return { role: 'unknown', from, reason: 'redis-unavailable', message };
        }
        return { role: 'unknown', from, reason: 'timeout', message: `The same command is being sent by ${from}; its outcome did not arrive in time (it may have been sent)` };
      }
      await sleep(Math.min(backoff.next(), left));
    }
  }
}

/** A claim as Redis holds it (claim-scripts.ts). */
interface Held {
  claimant: string;
  /** the claiming replica's id */
  from: string;
  outcome: ClaimOutcome<unknown> | null;
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

function parseOutcome<T>(json: string): ClaimOutcome<T> | null {
  try {
    const v = JSON.parse(json) as ClaimOutcome<T>;
    return v && typeof v === 'object' && typeof v.ok === 'boolean' ? v : null;
  } catch {
    return null;
  }
}
