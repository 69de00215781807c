/**
 * The nemesis's depot (fleet-process-chaos.ts): a `charging-depot` of limit 2
 * over four connectors, each replica's flow with the same `charging-control`
 * node, its wishes (on / off per connector) injected on every live replica at
 * once while the faults go on. The depot's control nodes use a configuration
 * of their own (its own fleet key, request budget and marker header), so the
 * watch's polling bound and budget are judged as before and the depot's
 * traffic apart.
 *
 * Invariants, checked at the simulator's door:
 * - the limit: never more than LIMIT sessions at once on the depot's
 *   connectors (counted exactly by the simulator), whatever the fault;
 * - no START nobody asked for: a START arrives only for a connector wanted
 *   on (at its arrival, or within WISH_SLACK_MS before: a START decided just
 *   before an off reached the replicas), and never while the connector has a
 *   session;
 * - a wish off is kept: after the faults, no connector wanted off has a
 *   session;
 * - and the slots are used: min(LIMIT, wanted on) connectors charge at the
 *   end, unless Redis lost the pool less than RECOUNT_MS before (then
 *   nobody new is granted until the sessions still charging were counted
 *   again: redis-grant-pool.ts), which the depot's own tests show.
 */
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../simulator/simulator';
import type { Outage } from './fleet-process-invariants';
import { recorder, type Replicas } from './fleet-replicas';
import { delay, type FlowNode } from './harness';

export const DEPOT_LIMIT = 2;
export const DEPOT_LOCATION = 'NDEP-LOC';
export const DEPOT_TARGETS = [1, 2, 3, 4].map((n) => ({ locationId: DEPOT_LOCATION, evseId: String(n), token: `NDEP-${n}` }));
/** the depot's configuration sends each replica's marker in this header (not the watch's) */
export const DEPOT_HEADER = 'x-depot-replica';
/** a START decided before an off reached the replicas may arrive this long after it */
const WISH_SLACK_MS = 2_000;
/** after Redis lost a pool, nobody new is granted this long (redis-grant-pool.ts's default) */
const RECOUNT_MS = 120_000;

export interface Wish {
  token: string;
  on: boolean;
  at: number;
  /** the replicas it was injected on */
  targets: number[];
}

/** The depot's nodes in the nemesis's flow (tab 'tab'); `svcD` gets the same credentials and coordination as the watch's. */
export function depotFlow(sim: ChargingServiceSimulator, timeoutS: number): FlowNode[] {
  return [
    { id: 'svcD', type: 'charging-service', name: 'depot', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: timeoutS, maxInFlight: 4, maxRequestsPerSec: 6, apiKeyHeader: DEPOT_HEADER, fleetKey: 'nemesis-depot' },
    { id: 'dep', type: 'charging-depot', name: 'nemesis', limit: DEPOT_LIMIT, minRun: 1, turn: 0, aging: 3600, idleKWh: 0, idleWindow: 0, overFor: 1, assumedKW: 11, countStation: true, onOver: 'shed' },
    { id: 'wish', type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic: 'on', payload: '{}', payloadType: 'json', repeat: '', once: false, x: 100, y: 500, wires: [['split']] },
    { id: 'split', type: 'function', z: 'tab', func: 'node.send({ payload: msg.payload.on, target: msg.payload.target });\nreturn null;', outputs: 1, x: 250, y: 500, wires: [['ctl']] },
    { id: 'ctl', type: 'charging-control', z: 'tab', service: 'svcD', depot: 'dep', locationId: '', evseId: '', token: '', guard: 0, checkInterval: 2, waitTimeout: 2, startAttempts: 2, retryInterval: 5, x: 400, y: 500, wires: [['recK']] },
    recorder('recK', 700, 500),
  ];
}

/** Wanted on or off: one connector's wish on every live replica at once. */
export async function injectWish(replicas: Replicas, live: number[], wishes: Wish[], token: string, on: boolean): Promise<string> {
  const target = DEPOT_TARGETS.find((t) => t.token === token);
  if (!target || live.length === 0) return `(no wish for ${token})`;
  wishes.push({ token, on, at: Date.now(), targets: live });
  const props = [{ p: 'payload', v: JSON.stringify({ on, target }), vt: 'json' }, { p: 'topic', v: 'on', vt: 'str' }];
  const failed: string[] = [];
  await Promise.all(live.map((i) => replicas.inject(i, 'wish', props).catch((e: Error) => failed.push(`${i}: ${e.message}`))));
  return `depot ${on ? 'on' : 'off'} ${token} on ${live.join(',')}${failed.length ? ` (failed ${failed.join('; ')})` : ''}`;
}

const isDepot = (token: string) => token.startsWith('NDEP-');
const charging = (sim: ChargingServiceSimulator) => DEPOT_TARGETS.filter((t) => sim.session(t.token)).length;

/** What the last wish of each connector says (undefined: never wished). */
function lastWish(wishes: Wish[], token: string, at = Infinity): Wish | undefined {
  return wishes.filter((w) => w.token === token && w.at <= at).at(-1);
}

/** After the faults: up to 40 s for the depot to do what its last wishes say (a failed START retries after 5 s). */
export async function settleDepot(sim: ChargingServiceSimulator, wishes: Wish[], outages: Outage[]): Promise<void> {
  const end = Date.now() + 40_000;
  while (Date.now() < end && !settled(sim, wishes, recounting(outages))) await delay(500);
}

/** Redis lost the pool within RECOUNT_MS: no new grant yet. */
const recounting = (outages: Outage[]) => outages.some((o) => o.kind === 'data-loss' && o.to > Date.now() - RECOUNT_MS);

function settled(sim: ChargingServiceSimulator, wishes: Wish[], recount: boolean): boolean {
  const on = DEPOT_TARGETS.filter((t) => lastWish(wishes, t.token)?.on).length;
  const offCharging = DEPOT_TARGETS.filter((t) => !lastWish(wishes, t.token)?.on && sim.session(t.token)).length;
  return offCharging === 0 && (recount || charging(sim) === Math.min(DEPOT_LIMIT, on));
}

export function checkDepot(sim: ChargingServiceSimulator, wishes: Wish[], outages: Outage[], from: number, violations: string[], figures: Record<string, number>): void {
  const peak = sim.peakSessions((s) => isDepot(s.token));
  figures.depotPeak = peak;
  if (peak > DEPOT_LIMIT) violations.push(`depot: ${peak} sessions at once on its connectors, limit ${DEPOT_LIMIT}: ${sessionsAtPeak(sim)}`);
  let starts = 0;
  for (const r of sim.requests) {
    if (r.method !== 'POST' || r.path !== SESSIONS_PATH) continue;
    let body: { action?: string; token?: string };
    try {
      body = JSON.parse(r.body) as typeof body;
    } catch {
      continue;
    }
    if (body.action !== 'START' || !body.token || !isDepot(body.token)) continue;
    starts++;
    const asked = lastWish(wishes, body.token, r.at)?.on === true || lastWish(wishes, body.token, r.at - WISH_SLACK_MS)?.on === true;
    if (!asked) violations.push(`depot: a START for ${body.token} at ${r.at - from} ms nobody asked for (wishes: ${wishesOf(wishes, body.token, from)})`);
    const token = body.token;
    if (sim.sessionsAt(r.at - 1, (s) => s.token === token) > 0) violations.push(`depot: a START for ${token} at ${r.at - from} ms while it had a session`);
  }
  figures.depotStarts = starts;
  figures.depotWishes = wishes.length;
  for (const t of DEPOT_TARGETS) {
    const last = lastWish(wishes, t.token);
    const live = sim.session(t.token);
    if (!last?.on && live) violations.push(`depot: ${t.token} wanted off (${wishesOf(wishes, t.token, from)}) still charges (session from ${live.startedAt - from} ms): a STOP that did not stop`);
  }
  const on = DEPOT_TARGETS.filter((t) => lastWish(wishes, t.token)?.on).length;
  figures.depotEndedInRecount = recounting(outages) ? 1 : 0;
  if (!recounting(outages) && charging(sim) < Math.min(DEPOT_LIMIT, on)) violations.push(`depot: ${charging(sim)} charging at the end with ${on} wanted on and a limit of ${DEPOT_LIMIT}`);
}

function wishesOf(wishes: Wish[], token: string, from: number): string {
  return wishes.filter((w) => w.token === token).map((w) => `${w.on ? 'on' : 'off'} at ${w.at - from} ms`).join(', ') || 'none';
}

/** The depot's sessions alive at the moment of the peak, for the report. */
function sessionsAtPeak(sim: ChargingServiceSimulator): string {
  const log = sim.sessionLog().filter((s) => isDepot(s.token));
  const at = log.map((s) => s.startedAt).find((t) => sim.sessionsAt(t, (s) => isDepot(s.token)) > DEPOT_LIMIT);
  if (at === undefined) return '(moment not found)';
  return log.filter((s) => s.startedAt <= at && (s.stoppedAt === null || s.stoppedAt > at)).map((s) => `${s.token} ${s.transactionId} from ${s.startedAt}${s.atStation ? ' (station)' : ''}`).join('; ');
}
