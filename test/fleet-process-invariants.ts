/**
 * The promises of a fleet under the nemesis (test/fleet-process-chaos.ts),
 * checked from outside: the simulator's door (which replica sent what, from
 * the `x-replica` marker) and the union of the replicas' flow outputs. What
 * holds, exactly (docs/fleet.md "The nemesis over processes"):
 *
 * - commands: each injected START/STOP arrives from the replicas exactly once.
 *   Two only if Redis lost its data while the command was being decided (the
 *   claim was lost: docs/fleet.md's failure table), never for a failover;
 *   none if the replica that claimed it could not reach the service (its
 *   egress failed; the error reaches every replica's Catch); a START none only if a
 *   replica it was injected on was killed (kill -9) within the read-back time
 *   (it may have held the claim and died before sending), a STOP only if
 *   every one was (the others take a dead claimer's STOP over). No command arrives
 *   that nobody injected;
 * - watch events: each session's `started` once, and its `ended` once if it
 *   was stopped (none if not), never lost; twice only if Redis lost its data
 *   during the session's life (its state was gone); no event for a session
 *   the driver never began;
 * - polling: no watched token goes unpolled longer than lease + 2 cycles + 2
 *   intervals + 1 s of noise, plus the time Redis was paused, restarting
 *   (with a reconnect) or failing over (until the promotion) within that
 *   gap; when one replica's egress fails, plus the time it takes to stand
 *   down (3 queries missed, each with its attempts, and a heartbeat:
 *   standDownMs below);
 * - stand-down: when the service fails for everyone, no replica gives its
 *   share away (its log says so when it does);
 * - budget: no 1 s window at the service holds more than the budget + 1
 *   requests from the replicas away from the faults; from a fault's start to
 *   3 s after its end, the budget + 1 + a replica's share (one replica cut off
 *   from Redis falls back to its share while the others keep the whole
 *   budget); in the 3 s after a SIGCONT or a Redis restart without data,
 *   twice the budget + 1;
 * - processes: every replica runs at the end, none logged an unhandled
 *   error, no secret in any log.
 */
import { POLL_SHARE } from '../nodes/lib/client/request-budget';
import { commandKey, type ChargingServiceSimulator } from '../simulator/simulator';
import { arrivals, busiestSecondOf, FAST_FLEET, STAND_DOWN_CONFIRM_MS, type Replicas } from './fleet-replicas';

export interface CommandInjected {
  action: 'START' | 'STOP';
  key: string;
  at: number;
  targets: number[];
}

export interface WatchSession {
  token: string;
  tx: string;
  startedAt: number;
  stoppedAt: number | null;
}

export interface Outage {
  /**
   * cut: one replica's Redis traffic withheld, black-holed or reset; failover: until the promotion;
   * egress: one replica's service traffic failing; service-down: the service failing for every replica
   */
  kind: 'pause' | 'data-loss' | 'stopped' | 'killed' | 'cut' | 'failover' | 'egress' | 'service-down';
  replica?: number;
  from: number;
  to: number;
  /** egress: how long one failed query of its replica takes */
  failMs?: number;
}

export interface RunRecord {
  sim: ChargingServiceSimulator;
  replicas: Replicas;
  commands: CommandInjected[];
  sessions: WatchSession[];
  outages: Outage[];
  watched: string[];
  from: number;
  to: number;
  secrets: string[];
  budgetPerSec: number;
  intervalMs: number;
}

/** the dedup's read-back time: a claim decided within it of the inject */
const DECIDED_MS = 12_000;
/** after a Redis restart: ioredis's reconnection pause reaches 2 s */
const RECONNECT_MS = 2_000;

export function checkInvariants(run: RunRecord): { violations: string[]; figures: Record<string, number> } {
  const violations: string[] = [];
  const figures: Record<string, number> = {};
  checkProcesses(run, violations);
  checkCommands(run, violations, figures);
  checkEvents(run, violations, figures);
  checkPolling(run, violations, figures);
  checkBudget(run, violations, figures);
  checkStandDowns(run, violations, figures);
  checkFailovers(run, figures);
  return { violations, figures };
}

const within = (outages: Outage[], kind: Outage['kind'], from: number, to: number) => outages.filter((o) => o.kind === kind && o.to >= from && o.from <= to);

function checkProcesses(run: RunRecord, violations: string[]): void {
  run.replicas.procs.forEach((p, i) => {
    if (!p.running) violations.push(`replica ${i} is not running at the end`);
    const log = run.replicas.log(i);
    const crash = /Unhandled|uncaughtException/.exec(log);
    if (crash) violations.push(`replica ${i} logged: ${log.slice(Math.max(0, crash.index - 200), crash.index + 300)}`);
    for (const s of run.secrets) if (log.includes(s)) violations.push(`a secret reached replica ${i}'s log`);
  });
}

function checkCommands(run: RunRecord, violations: string[], figures: Record<string, number>): void {
  const arrived = new Map<string, number>();
  const arrivedAt = new Map<string, number[]>();
  for (const r of run.sim.requests) {
    if (r.method !== 'POST' || !/^replica-\d+-marker$/.test(String(r.headers['x-replica'] ?? ''))) continue;
    let id: ReturnType<typeof commandKey> = null;
    try {
      id = commandKey(JSON.parse(r.body) as Record<string, unknown>);
    } catch {
      id = null;
    }
    const k = id ? `${id.action} ${id.key}` : `unreadable ${r.body.slice(0, 80)}`;
    arrived.set(k, (arrived.get(k) ?? 0) + 1);
    arrivedAt.set(k, [...(arrivedAt.get(k) ?? []), r.at]);
  }
  let twice = 0;
  let none = 0;
  let joined = 0;
  // The same STOP may be injected again (its session went on): each key's arrivals against its injects.
  const byKey = new Map<string, CommandInjected[]>();
  for (const c of run.commands) byKey.set(`${c.action} ${c.key}`, [...(byKey.get(`${c.action} ${c.key}`) ?? []), c]);
  for (const [k, injects] of byKey) {
    const n = arrived.get(k) ?? 0;
    arrived.delete(k);
    // The same command injected again while the last one had not yet gone out (its claim waiting for Redis) is that
    // command repeated: one arrival for both. An inject counts when the key arrived since the one before it.
    const times = arrivedAt.get(k) ?? [];
    const m = injects.filter((c, j) => j === 0 || times.some((t) => t >= injects[j - 1].at && t < c.at)).length;
    joined += injects.length - m;
    if (n === m) continue;
    const losses = injects.filter((c) => within(run.outages, 'data-loss', c.at, c.at + DECIDED_MS).length > 0).length;
    // A START whose claimer was killed before sending is not sent by the others (OUTCOME_UNKNOWN at their Catch); a STOP's
    // duplicates take it over, so a STOP goes unsent only when every replica it was injected on was killed.
    const killed = (c: CommandInjected) => within(run.outages, 'killed', c.at, c.at + DECIDED_MS).map((o) => o.replica ?? -1);
    const kills = injects.filter((c) => (k.startsWith('STOP ') ? c.targets.every((t) => killed(c).includes(t)) : killed(c).some((t) => c.targets.includes(t)))).length;
    // A replica cut off, stopped or killed past a lease looks gone to the others: a STOP it claimed is sent again by them,
    // by design (a STOP that did not stop is worse than one sent twice); a START never is.
    const goneSenders = k.startsWith('STOP ') ? injects.filter((c) => (['cut', 'stopped', 'killed'] as const).some((kind) => within(run.outages, kind, c.at, c.at + DECIDED_MS).some((o) => c.targets.includes(o.replica ?? -1)))).length : 0;
    // Claimed by a replica whose egress failed (before it knew, or with no healthy peer to leave it to): its error went to every Catch.
    const unreached = injects.filter((c) => within(run.outages, 'egress', c.at, c.at + DECIDED_MS).some((o) => c.targets.includes(o.replica ?? -1))).length;
    if (n > m && n - m <= losses + goneSenders) twice += n - m;
    else if (n < m && m - n <= kills + unreached) none += m - n;
    else {
      const when = injects.map((c) => `${c.at - run.from} ms on ${c.targets.join(',')}`).join(', ');
      violations.push(`${k}: injected ${injects.length} time(s)${m < injects.length ? ` (${injects.length - m} while the one before was pending)` : ""} (${when}), arrived ${n} times${losses ? ' (Redis lost its data meanwhile)' : ''}${kills ? ' (a replica was killed meanwhile)' : ''}; the flows got: ${flowsGot(run, injects)}`);
    }
  }
  for (const [k, n] of arrived) violations.push(`${k}: arrived ${n} times, never injected`);
  figures.commands = run.commands.length;
  figures.commandsJoiningOneStillPending = joined;
  figures.commandsTwiceAfterDataLossOrGoneSender = twice;
  figures.commandsLostWithKilledOrCutOffSender = none;
}

/** What the START/STOP nodes and Catch emitted within 15 s of each inject: who sent, who was a duplicate, which errors. */
function flowsGot(run: RunRecord, injects: CommandInjected[]): string {
  const outs = ['recS', 'recT', 'recE'].flatMap((n) => run.replicas.outputs(n));
  return injects
    .map((c) => outs.filter((o) => o.at >= c.at && o.at <= c.at + 15_000).map((o) => `${o.n}@${o.replica}+${o.at - c.at}ms ${o.fleet?.role ?? ''}${o.statusCode ? ` ${o.statusCode}` : ''}${o.tx ? ` ${o.tx}` : ''}${o.error ? ` ${o.error.code ?? ''} ${String(o.error.message ?? '').slice(0, 120)}` : ''}`).join('; '))
    .join(' | ');
}

function checkEvents(run: RunRecord, violations: string[], figures: Record<string, number>): void {
  const outs = run.replicas.outputs('recW').filter((o) => o.event === 'started' || o.event === 'ended');
  const known = new Set(run.sessions.map((s) => s.tx));
  let repeats = 0;
  let lostWithReporter = 0;
  for (const s of run.sessions) {
    const loss = within(run.outages, 'data-loss', s.startedAt, s.stoppedAt ?? run.to).length > 0;
    for (const event of ['started', 'ended'] as const) {
      const n = outs.filter((o) => o.event === event && o.tx === s.tx).length;
      const want = event === 'ended' && s.stoppedAt === null ? 0 : 1;
      if (n === want) continue;
      // A session no poll saw while it was there (it began and ended in a gap the polling bound allows) cannot be reported.
      if (n === 0 && !observed(run, s)) continue;
      if (want === 1 && n === 2 && loss) {
        repeats++;
        continue;
      }
      // Redis lost its data and the replica that reported the session was killed too: nothing anywhere knows it was seen.
      if (event === 'ended' && n === 0 && loss && reporterKilled(run, outs, s)) {
        lostWithReporter++;
        continue;
      }
      const seen = outs.filter((o) => o.topic === s.token).map((o) => `${o.event} ${o.tx ?? '?'} (replica ${o.replica} at ${o.at - run.from} ms)`);
      const life = `began ${s.startedAt - run.from} ms${s.stoppedAt === null ? '' : `, stopped ${s.stoppedAt - run.from} ms`}`;
      const polled = arrivals(run.sim, 0, 'GET').filter((a) => a.token === s.token && a.replica >= 0 && a.at >= (s.stoppedAt ?? s.startedAt)).slice(0, 6).map((a) => `${a.replica}@${a.at - run.from}`);
      violations.push(`session ${s.tx} on ${s.token} (${life}): ${event} emitted ${n} times, want ${want}${loss ? ' (at most 2: Redis lost its data meanwhile)' : ''}; events: ${seen.join(', ')}; polls from then: ${polled.join(' ')}`);
    }
  }
  for (const o of outs) if (!o.tx || !known.has(o.tx)) violations.push(`${o.event} on ${String(o.topic)} for a session nobody began (${o.tx ?? 'no transaction'}, replica ${o.replica})`);
  figures.sessions = run.sessions.length;
  figures.eventsRepeatedAfterDataLoss = repeats;
  figures.endedLostWithDataLossAndReporterKilled = lostWithReporter;
}

/** Whether the replica that reported the session's started was killed while the session went on (its memory gone with it). */
function reporterKilled(run: RunRecord, outs: Array<{ event?: unknown; tx?: string; replica: number }>, s: RunRecord['sessions'][number]): boolean {
  const reporter = outs.find((o) => o.event === 'started' && o.tx === s.tx)?.replica;
  return reporter !== undefined && within(run.outages, 'killed', s.startedAt, s.stoppedAt ?? run.to).some((o) => o.replica === reporter);
}

/** Whether any replica polled the session's token while the session was there. */
function observed(run: RunRecord, s: RunRecord['sessions'][number]): boolean {
  const until = s.stoppedAt ?? run.to;
  return arrivals(run.sim, 0, 'GET').some((a) => a.token === s.token && a.replica >= 0 && a.at >= s.startedAt && a.at <= until);
}

function checkPolling(run: RunRecord, violations: string[], figures: Record<string, number>): void {
  const polls = arrivals(run.sim, 0, 'GET').filter((a) => a.replica >= 0 && run.watched.includes(a.token));
  // The interval the tokens are polled at: stretched when the watch asks more than its share of Max requests per second (the node says so).
  const demand = run.watched.length / (run.intervalMs / 1000);
  const pollMs = run.intervalMs * Math.max(1, demand / (POLL_SHARE * run.budgetPerSec));
  const base = Math.round(FAST_FLEET.leaseMs + 2 * FAST_FLEET.cycleMs + 2 * pollMs + 1000);
  const standDown = (o: Outage) => standDownMs(o, pollMs);
  const start = Math.min(...run.watched.map((t) => polls.find((p) => p.token === t)?.at ?? Infinity));
  if (!Number.isFinite(start)) {
    violations.push('a watched token was never polled');
    return;
  }
  let worst = { token: '', ms: 0, over: -Infinity, at: 0, since: 0 };
  let longest = 0;
  for (const t of run.watched) {
    const at = [start, ...polls.filter((p) => p.token === t).map((p) => p.at), run.to];
    for (let i = 1; i < at.length; i++) {
      const gap = at[i] - at[i - 1];
      longest = Math.max(longest, gap);
      const since = Math.max(at[i - 1], lastDisturbance(run.outages, at[i - 1], at[i], standDown));
      const over = at[i] - since - base;
      if (over > worst.over) worst = { token: t, ms: gap, over, at: at[i - 1] - run.from, since: since - run.from };
    }
  }
  figures.longestGapMs = longest;
  figures.longestGapOverBoundMs = worst.over;
  if (worst.over > 0) violations.push(`${worst.token} unpolled for ${worst.ms} ms from ${worst.at} ms: ${worst.over + base} ms after the last fault (at ${worst.since} ms), bound ${base} ms`);
}

/**
 * How long a replica whose egress fails takes to stand down: 3 queries missed
 * in a row (service-reach.ts), each taking `failMs`, one after another at
 * worst: a token's next query waits for the one in flight, and a failed
 * query of a token that moved to another replica meanwhile is not counted
 * (the nemesis saw a silent egress outlast one round when the replica's
 * tokens moved under it), so a replica may have one query in flight at a
 * time that counts. Each is followed by an interval; then a peer's answer
 * reaches Redis with its heartbeat, is seen for the confirmation
 * (STAND_DOWN_CONFIRM_MS), and this replica's review leaves the scopes
 * (3 cycles).
 */
function standDownMs(o: Outage, pollMs: number): number {
  return 3 * ((o.failMs ?? 0) + pollMs) + STAND_DOWN_CONFIRM_MS + 3 * FAST_FLEET.cycleMs;
}

/**
 * When, within the gap [from, to], the last fault ended (or from, if none did):
 * a token must be polled within the bound of that. A kill counts at its
 * moment (the others take over from it) and at the replica's return.
 */
function lastDisturbance(outages: Outage[], from: number, to: number, standDown: (o: Outage) => number): number {
  let last = from;
  for (const o of outages) {
    // One replica's egress failing: its tokens move to the peers once it stood down (standDownMs); a gap that began after
    // that may also end with its share coming back when its egress does. A gap across the whole fault is not excused by its end.
    const stoodDown = o.kind === 'egress' ? o.from + standDown(o) : o.to;
    if (o.kind === 'egress') {
      if (o.from <= to && stoodDown >= from) last = Math.max(last, Math.min(stoodDown, to));
      if (from >= stoodDown && o.to >= from && o.to <= to) last = Math.max(last, o.to);
      continue;
    }
    const ends = o.kind === 'killed' ? [o.from, o.to] : [o.to + (o.kind === 'data-loss' ? RECONNECT_MS : 0)];
    for (const e of ends) {
      if (o.kind === 'killed' ? e >= from && e <= to : o.from <= to && e >= from) last = Math.max(last, Math.min(e, to));
    }
  }
  return last;
}

/**
 * Outside the faults the fleet keeps its budget (budget + 1 in any 1 s). From
 * a fault's start to 3 s after its end (Redis's 2 s command timeout and a
 * margin) one replica may be on its local budget at its share (budget / 3)
 * while the others still share the whole budget through Redis: budget + 1 +
 * that share. In the 3 s after a SIGCONT (the stopped replica's reserved
 * starts go out at once) or a Redis restart without data (the budget's key
 * is gone, the reservations made before it still stand): twice the budget + 1.
 */
function checkBudget(run: RunRecord, violations: string[], figures: Record<string, number>): void {
  const sent = arrivals(run.sim, 0).filter((a) => a.replica >= 0);
  const faulted = (at: number) => run.outages.some((o) => at >= o.from && at <= o.to + 3000);
  const quiet = sent.filter((a) => !faulted(a.at));
  const share = Math.ceil(run.budgetPerSec / run.replicas.procs.length);
  const busiest = busiestSecondOf(quiet.map((a) => a.at));
  const all = busiestSecondOf(sent.map((a) => a.at));
  figures.busiestSecondQuiet = busiest;
  figures.busiestSecondAll = all;
  const over = (list: typeof sent, most: number, bound: number, where: string) => {
    if (most <= bound) return;
    const first = list.find((a) => list.filter((b) => b.at >= a.at && b.at < a.at + 1000).length === most) ?? list[0];
    const shown = list.filter((b) => b.at >= first.at && b.at < first.at + 1000).map((b) => `${b.method === 'GET' ? 'G' : 'P'}${b.replica}@${b.at - run.from}`);
    violations.push(`${most} requests in one second at the service ${where} (bound ${bound}, budget ${run.budgetPerSec}/s), from ${first.at - run.from} ms: ${shown.join(' ')}`);
  };
  const late = (at: number) => run.outages.some((o) => (o.kind === 'stopped' || o.kind === 'data-loss') && at >= o.to && at <= o.to + 3000);
  const faultedNotLate = sent.filter((a) => !late(a.at));
  over(quiet, busiest, run.budgetPerSec + 1, 'away from the faults');
  over(faultedNotLate, busiestSecondOf(faultedNotLate.map((a) => a.at)), run.budgetPerSec + 1 + share, 'during a fault');
  over(sent, all, 2 * run.budgetPerSec + 1, 'after a SIGCONT or a Redis restart');
}

/** Node-RED's log time ("28 Nov 15:39:17 - [warn] …", local time, to the second) as epoch ms, in the year of `near`. */
function logTime(line: string, near: number): number | null {
  const m = /^(\d{1,2}) (\w{3}) (\d{2}):(\d{2}):(\d{2}) - /.exec(line);
  if (!m) return null;
  const month = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'].indexOf(m[2]);
  if (month < 0) return null;
  return new Date(new Date(near).getFullYear(), month, Number(m[1]), Number(m[3]), Number(m[4]), Number(m[5])).getTime();
}

/**
 * Nobody stands down when the service fails for everyone: no replica says it
 * gives its share away within a service-down outage (whole seconds inside it:
 * the log says the second), unless its own egress failed in the 20 s before
 * (a stand-down decided from that streak). Figures: stand-downs in all, and
 * egress faults after which their replica stood down.
 */
function checkStandDowns(run: RunRecord, violations: string[], figures: Record<string, number>): void {
  const downs = run.outages.filter((o) => o.kind === 'service-down');
  const egress = run.outages.filter((o) => o.kind === 'egress');
  let standDowns = 0;
  let egressStoodDown = 0;
  run.replicas.procs.forEach((_, i) => {
    const times = run.replicas
      .log(i)
      .split('\n')
      .filter((l) => /gives its watched tokens and control targets to the others/.test(l))
      .map((l) => logTime(l, run.from))
      .filter((t): t is number => t !== null);
    standDowns += times.length;
    egressStoodDown += egress.filter((o) => o.replica === i && times.some((t) => t >= o.from - 1000 && t <= o.to + 20_000)).length;
    for (const d of downs) {
      const inside = times.filter((t) => t >= d.from + 1000 && t + 1000 <= d.to + 1000);
      const excused = egress.some((o) => o.replica === i && o.to <= d.to && o.to >= d.from - 20_000);
      if (inside.length > 0 && !excused) violations.push(`replica ${i} stood down while the service failed for everyone (${d.from - run.from}..${d.to - run.from} ms): at ${inside.map((t) => t - run.from).join(', ')} ms`);
    }
  });
  figures.standDowns = standDowns;
  figures.egressFaults = egress.length;
  figures.egressFaultsStoodDown = egressStoodDown;
  figures.serviceDowns = downs.length;
}

/**
 * After each failover (its promotion): how long until every watched token was
 * polled again, the worst over the failovers and the tokens polled before the
 * next fault began (the goal: lease + 2 cycles, plus the interval the tokens
 * are polled at).
 */
function checkFailovers(run: RunRecord, figures: Record<string, number>): void {
  const fos = run.outages.filter((o) => o.kind === 'failover');
  if (fos.length === 0) return;
  const polls = arrivals(run.sim, 0, 'GET').filter((a) => a.replica >= 0 && run.watched.includes(a.token));
  let worst = 0;
  for (const o of fos) {
    // Up to the next fault: a token first polled after another one began says nothing of this failover.
    const next = Math.min(run.to, ...run.outages.filter((x) => x.from > o.to).map((x) => x.from));
    for (const t of run.watched) {
      const first = polls.find((p) => p.token === t && p.at >= o.to);
      if (first && first.at <= next) worst = Math.max(worst, first.at - o.to);
    }
  }
  figures.failovers = fos.length;
  figures.repolledAfterPromotionMs = worst;
}
