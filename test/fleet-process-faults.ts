/**
 * The nemesis's faults (fleet-process-chaos.ts): the kinds of each Redis
 * deployment, how long each lasts, and a seed's plan. An egress fault lasts
 * until its replica must have stood down (missMs), so a replica that did not
 * leaves a token unpolled past its bound.
 */
import { seeded } from './fleet-chaos';
import { FAST_FLEET, STAND_DOWN_CONFIRM_MS } from './fleet-replicas';

/** the replicas */
export const N = 3;
/** the watch node's interval and the fleet's request budget: the watch alone asks more than the budget allows */
export const INTERVAL_MS = 1000;
export const BUDGET_PER_SEC = 8;
/** the interval the watched tokens are polled at: 10 tokens at 1 s ask 10/s of a budget of 8 with 80 % for polls (the node says so) */
export const POLL_MS = 1560;

export type FaultKind = 'lost-reply' | 'blackhole' | 'reset' | 'pause' | 'redis-restart' | 'sigstop' | 'kill' | 'failover' | 'primary-kill' | 'egress-503' | 'egress-reset' | 'egress-silent' | 'service-down';
/** what both deployments have */
const COMMON_KINDS: FaultKind[] = ['pause', 'sigstop', 'kill', 'egress-503', 'egress-reset', 'egress-silent', 'service-down'];
export const FAULT_KINDS: Record<Topology, FaultKind[]> = {
  single: ['lost-reply', 'blackhole', 'reset', 'redis-restart', ...COMMON_KINDS],
  sentinel: ['failover', 'primary-kill', ...COMMON_KINDS],
};
export type Topology = 'single' | 'sentinel';

/** the configuration's request timeout, s: a silent egress costs this per attempt */
export const TIMEOUT_S = 3;
/**
 * How long a replica whose egress fails takes to miss 3 queries in a row
 * (each after its 4 attempts: a timeout each when nothing answers, and the
 * pauses between them, 1.75 s; the third begun within an interval of the
 * first), and for a peer's answer since then to reach Redis with its
 * heartbeat, be seen for the confirmation, and this replica's review to
 * leave the scopes (3 cycles): after that it has stood down (service-reach.ts).
 */
export function missMs(kind: FaultKind): number {
  return failMs(kind) + POLL_MS + STAND_DOWN_CONFIRM_MS + 3 * FAST_FLEET.cycleMs;
}

/**
 * How long one failed query takes: its 4 attempts (a timeout each when
 * nothing answers), the pauses between them (1.75 s), and each attempt's
 * wait for its place in the fleet's request budget, always in use here. The
 * places go in the order asked across the fleet, not by shares: at worst an
 * attempt waits behind every other token's poll, a round of the budget
 * (POLL_MS). Seed 12 stood down 6 s past a bound that left the budget out;
 * seed 5 of a later run 3.9 s past one that counted a replica's fair share
 * (0.47 s an attempt: it waited about 0.8 s).
 */
export function failMs(kind: FaultKind): number {
  const place = POLL_MS;
  return (kind === 'egress-silent' ? 4 * TIMEOUT_S * 1000 : 0) + 1750 + 4 * place;
}

export interface Fault {
  kind: FaultKind;
  replica: number;
  ms: number;
  /** pause before the next fault */
  restMs: number;
}

/** The seed's faults: every kind of the deployment once in a seeded order, then more at random until `seconds` are filled. */
export function planFaults(seed: number, seconds: number, topology: Topology = 'single', only?: FaultKind[]): Fault[] {
  const rnd = seeded(seed * 7919 + 1);
  const all = FAULT_KINDS[topology].filter((k) => !only || only.includes(k));
  const kinds = [...all];
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j], kinds[i]];
  }
  const faults: Fault[] = [];
  let total = 0;
  for (let k = 0; k < kinds.length || total < seconds * 1000; k++) {
    const kind = k < kinds.length ? kinds[k] : all[Math.floor(rnd() * all.length)];
    const f = { kind, replica: Math.floor(rnd() * N), ms: Math.round(faultMs(kind, rnd)), restMs: Math.round(800 + rnd() * 1200) };
    faults.push(f);
    total += f.ms + f.restMs + (kind === 'kill' ? 3000 : 0);
  }
  return faults;
}

/** How long a fault lasts: an egress fault long enough for its replica to stand down (missMs) and be seen doing so. */
export function faultMs(kind: FaultKind, rnd: () => number): number {
  switch (kind) {
    case 'lost-reply':
      return 200 + rnd() * 800;
    case 'blackhole':
      return 500 + rnd() * 3000;
    case 'pause':
      return 2500;
    case 'sigstop':
      return FAST_FLEET.leaseMs + 200 + rnd() * 2000;
    case 'egress-503':
    case 'egress-reset':
      // Longer than the polling bound with the slowest stand-down in it (3 failed queries in turn, fleet-process-invariants.ts):
      // a replica that did not stand down leaves a token unpolled past it.
      return 3 * missMs(kind) + FAST_FLEET.leaseMs + 2 * FAST_FLEET.cycleMs + 2 * POLL_MS + 1000 + 1000 + rnd() * 2000;
    case 'egress-silent':
      // Long enough for a replica polling 3 tokens to stand down (one round of failed queries); the slowest would take 46 s.
      return missMs(kind) + FAST_FLEET.leaseMs + 2 * FAST_FLEET.cycleMs + 2 * POLL_MS + 1000 + 1000 + rnd() * 2000;
    case 'service-down':
      return 2000 + rnd() * 2000;
    default:
      return 0;
  }
}
