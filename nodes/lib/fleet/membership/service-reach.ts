/**
 * Stand-down by comparison (docs/fleet.md, "A replica that cannot reach the
 * service"): the question is not which error a replica gets, but whether its
 * peers get answers where it does not. A gateway or proxy in front of one
 * replica answers in its own words (Squid's 503, a reset, a silent timeout);
 * the service's own 5xx would look the same from one replica alone.
 *
 * - Each replica counts its failed queries in a row (any failure that says
 *   the query did not get the service's answer: network, timeout, refused
 *   token, 429, 5xx, a gateway's 404; not the service's word on one query,
 *   such as a 400) and when it last got an answer, and publishes both with
 *   its heartbeat (`reach` in its info).
 * - A replica with `failures` in a row gives its share away (every watch and
 *   control scope: it leaves their members, so rendezvous hands its tokens and
 *   targets to the others) while at least one live peer got an answer from
 *   the service *after* this replica's streak of failures began, and failed
 *   none since. When every replica fails, the service is down for everyone:
 *   no peer's last answer is younger than the outage, so nobody stands down,
 *   whatever their poll rates, and polling backs off as it does alone. Both
 *   times are placed on Redis's clock: a peer's heartbeat keeps Redis's time
 *   with the age of its last answer, and this replica's own heartbeat says
 *   where its streak began on that clock (at the latest: counted from when
 *   the heartbeat was sent). `marginMs` allows for the lag of the peer's
 *   event loop behind the answer it counted (under load, the last answers of
 *   an outage's first moment are taken in hundreds of ms late) and for its
 *   heartbeat's way to Redis. A replica standing down comes back
 *   as soon as no healthy peer is left (the last one standing polls).
 * - Standing down, it probes every `probeMs` (from the fleet's loop: no timer
 *   of its own) and takes its share back at the first answer.
 * - Its commands (a START or STOP claimed once by the fleet) wait a moment
 *   before they claim (`deferCommands`), so that a healthy peer given the
 *   same command claims it first; when none does, this replica sends it.
 */
import type { ServiceReachShare } from '../../coordination/reach';
import type { ChargingError } from '../../errors';
import type { ReplicaInfo } from './replica-info';

/** What a replica publishes of its queries: failed in a row, and ms since its last answer (null: none yet). */
export interface Reach {
  fails: number;
  okAgoMs: number | null;
}

export interface ServiceReachOptions {
  /** failed queries in a row before the share is given away (default 3) */
  failures?: number;
  /** pause between probes while standing down (default 5 s) */
  probeMs?: number;
  /** how late a peer's answer may be placed: its event loop's lag and its heartbeat's way to Redis (default 1 s) */
  marginMs?: number;
  /**
   * how long a healthy peer must be seen while this replica's streak goes on
   * before it stands down (default 3 s): when an outage of everyone ends, the
   * first replicas back look healthy to the others until their own polls,
   * still in their retries, get answers too
   */
  confirmMs?: number;
  now: () => number;
  /** told once per stand-down and once when back, with the failure that decided it */
  onChange?: (standingDown: boolean, why: string) => void;
}

/** Failures that are the service's word on one query (it was reached): they count as answers. */
const ANSWERED_STATUS = new Set([400, 409, 410, 422]);
/** Codes that say nothing about reaching the service (input, configuration, our own failure, a closed node). */
const REACH_CODES = new Set(['NETWORK', 'TIMEOUT', 'AUTH', 'RATE_LIMITED', 'BAD_RESPONSE', 'HTTP']);

/** true: the query did not get the service's answer; false: it did; null: it says nothing either way. */
export function missedService(err: ChargingError | null): boolean | null {
  if (err === null) return false;
  if (!REACH_CODES.has(err.code)) return null;
  return !(err.code === 'HTTP' && err.statusCode !== undefined && ANSWERED_STATUS.has(err.statusCode));
}

export class ServiceReach implements ServiceReachShare {
  private fails = 0;
  private lastFailure = '';
  private okAt: number | null = null;
  /** when the streak of failures began (monotonic ms) */
  private failingSince = 0;
  private standing = false;
  private lastProbeAt = -Infinity;
  private probing = false;
  private readonly probes: Array<() => Promise<unknown>> = [];
  private readonly failures: number;
  private readonly probeMs: number;
  private readonly marginMs: number;
  private peersHealthy = false;
  /** monotonic ms since a healthy peer has been seen during this streak (null: not seen) */
  private healthySince: number | null = null;
  private readonly confirmMs: number;
  /** times this replica gave its share away (the metrics count them) */
  standDowns = 0;

  constructor(private readonly options: ServiceReachOptions) {
    this.failures = options.failures ?? 3;
    this.probeMs = options.probeMs ?? 5_000;
    this.marginMs = options.marginMs ?? 1_000;
    this.confirmMs = options.confirmMs ?? 3_000;
  }

  polled(err: ChargingError | null): void {
    const missed = missedService(err);
    if (missed === null) return;
    if (missed) {
      if (this.fails === 0) this.failingSince = this.options.now();
      this.fails++;
      this.lastFailure = err?.message ?? '';
    } else {
      this.fails = 0;
      this.okAt = this.options.now();
    }
  }

  probeWith(probe: () => Promise<unknown>): () => void {
    this.probes.push(probe);
    return () => {
      const i = this.probes.indexOf(probe);
      if (i >= 0) this.probes.splice(i, 1);
    };
  }

  /** What the heartbeat publishes. */
  published(): Reach {
    return { fails: this.fails, okAgoMs: this.okAt === null ? null : Math.round(this.options.now() - this.okAt) };
  }

  get standingDown(): boolean {
    return this.standing;
  }

  /** This replica misses the service where a peer gets it: its commands wait for a peer to claim them first. */
  get deferCommands(): boolean {
    return this.fails >= this.failures && this.peersHealthy;
  }

  /**
   * After each heartbeat, with the live replicas it read and Redis's time in
   * its answer (`sentAt`: this replica's monotonic ms when it was sent):
   * stand down, come back, or probe. Returns whether this replica stands down now.
   */
  review(me: string, live: ReplicaInfo[], clock: { redisMs: number; sentAt: number }): boolean {
    const now = this.options.now();
    const missing = this.fails >= this.failures;
    // On Redis's clock, the latest this replica's streak can have begun; a peer's last answer must be later.
    const streakFrom = clock.redisMs - (clock.sentAt - this.failingSince);
    this.peersHealthy = missing && live.some((r) => r.id !== me && r.at !== undefined && r.reach?.fails === 0 && r.reach.okAgoMs !== null && r.at - r.reach.okAgoMs - this.marginMs > streakFrom);
    // Seen for confirmMs of this streak, not once: at the end of an outage of everyone the first back look healthy for a moment.
    this.healthySince = this.peersHealthy ? (this.healthySince ?? now) : null;
    const confirmed = this.healthySince !== null && now - this.healthySince >= this.confirmMs;
    if (!this.standing && confirmed) this.change(true, `${this.fails} queries in a row got no answer from the service (${this.lastFailure}) while another replica gets answers`);
    else if (this.standing && (!missing || !this.peersHealthy)) this.change(false, missing ? 'no other replica gets answers from the service either' : 'the service answers again');
    if (this.standing && !this.probing && now - this.lastProbeAt >= this.probeMs) void this.probe(now);
    return this.standing;
  }

  private async probe(now: number): Promise<void> {
    const probe = this.probes[0];
    if (!probe) return;
    this.probing = true;
    this.lastProbeAt = now;
    try {
      await probe();
      this.polled(null);
    } catch (err) {
      this.polled(err as ChargingError);
    } finally {
      this.probing = false;
    }
  }

  private change(standing: boolean, why: string): void {
    this.standing = standing;
    if (standing) this.standDowns++;
    try {
      this.options.onChange?.(standing, why);
    } catch {
      // the listener's failure is its own
    }
  }
}
