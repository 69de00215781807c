/**
 * charging-control's Node-RED side: the settings from the dialog, the
 * configuration's client for every request, the context store for what is kept,
 * a message on every change of state, and the badge ("on → charging 4.2 kWh").
 * The rules live in nodes/lib/control.
 */
import type { Node, NodeAPI, NodeMessage } from 'node-red';
import { DEFAULT_RETRY } from '../lib/client/request';
import type { ServiceClient } from '../lib/client/service-client';
import { monotonicNow } from '../lib/clock';
import { ControlBook } from '../lib/control/book';
import { ConnectorClaims } from '../lib/control/claims';
import type { CheckPriority, ControlClock, ControlDeps, ControlSnapshot } from '../lib/control/controller';
import type { ControlSettings } from '../lib/control/memory';
import { ENDED_AT_STATION, type WishOptions } from '../lib/control/reconcile';
import type { ControlTarget } from '../lib/control/view';
import type { Coordination } from '../lib/coordination/coordination';
import { openControlShare, type ControlShare } from '../lib/control/control-share';
import { LocalCoordination } from '../lib/coordination/local';
import { reachReporter } from '../lib/coordination/reach';
import { ChargingError } from '../lib/errors';
import { chargingSessionSettings, positiveNumber, waitTimeoutMs } from '../lib/settings';
import { DEFAULT_ENSURE_ATTEMPTS } from './confirm';
import { controlDepot, type ControlDepot } from './control-depot';
import { ContextControlStore } from './context-control-store';
import type { NodeLifecycle } from './node-lifecycle';
import { getService } from './service-node';
import { formatEnergy, NodeStatus, Status, StatusKey } from './status';
import { literalFields, typedFields } from './typed-fields';
import { resolveFields } from '../lib/session/inputs';
import type { ControlFigures } from '../lib/metrics/figures';
import { CONTROL_STATES } from '../lib/metrics/labels';

export interface ControlConfig {
  service: string;
  /** seconds, 0 = off (default 300) */
  guard?: string | number;
  /** seconds (default 30) */
  checkInterval?: string | number;
  /** 1–5 (default 2) */
  startAttempts?: string | number;
  /** seconds (default 60) */
  waitTimeout?: string | number;
  enforce?: boolean;
  contextStore?: string;
  /** seconds, 0 = never by itself (default 600) */
  retryInterval?: string | number;
  /** seconds (default 0) */
  onDelay?: string | number;
  offDelay?: string | number;
  /** kWh, empty = no limit */
  energyLimit?: string | number;
  /** the charging-depot config node (empty: no limit) */
  depot?: string;
  /** the place in the depot's queue, an integer (default 0); msg.priority with a wish */
  priority?: string | number;
}

/** A check every this many ms at most while a START or STOP is awaited, so that "charging" follows the car promptly. */
export const CONFIRM_MS = 2_000;

/** The dialog's settings as the controller's, with the poll floor of settings.js (chargingSession.minPollIntervalSec) for the check interval. */
export function controlSettings(config: ControlConfig, floorSec: number): { settings: ControlSettings; raised?: string; unreadLimit?: string } {
  const check = positiveNumber(config.checkInterval, 30, 0.01, 86_400);
  const checkSec = Math.max(floorSec, check);
  const checkMs = checkSec * 1000;
  return {
    settings: {
      guardMs: positiveNumber(config.guard, 300, 0, 86_400) * 1000,
      checkMs,
      confirmMs: Math.min(CONFIRM_MS, checkMs),
      waitMs: waitTimeoutMs(config.waitTimeout),
      startAttempts: Math.round(positiveNumber(config.startAttempts, 2, 1, 5)),
      stopAttempts: DEFAULT_ENSURE_ATTEMPTS,
      enforce: config.enforce === true,
      retryMs: positiveNumber(config.retryInterval, 600, 0, 86_400) * 1000,
      onDelayMs: positiveNumber(config.onDelay, 0, 0, 86_400) * 1000,
      offDelayMs: positiveNumber(config.offDelay, 0, 0, 86_400) * 1000,
      energyLimitKWh: energyLimit(config.energyLimit),
    },
    raised: checkSec > check ? `Check interval raised from ${check} s to the minimum of ${floorSec} s` : undefined,
    // A limit the node cannot read would charge to full in silence: said at deploy (the value typed is not echoed).
    unreadLimit: energyLimit(config.energyLimit) === null && !noLimit(config.energyLimit) ? 'The energy limit is not a number of kWh above 0: the node runs with no energy limit' : undefined,
  };
}

const noLimit = (raw: unknown): boolean => raw === undefined || raw === null || raw === 0 || (typeof raw === 'string' && (raw.trim() === '' || Number(raw) === 0));

/** kWh, or null for none (empty, 0 or not a number); a decimal comma is read as a point ("20,5", as the German dialog invites). */
export function energyLimit(raw: unknown): number | null {
  const text = typeof raw === 'string' ? raw.trim().replace(/^(\d+),(\d+)$/, '$1.$2') : raw;
  const kwh = positiveNumber(text, 0, 0, 10_000);
  return kwh > 0 ? kwh : null;
}

const realClock: ControlClock = {
  now: monotonicNow,
  wall: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return () => clearTimeout(t);
  },
};

/** The output on a change of state (the contract: payload, wanted, reason, session, target). */
export function controlMessage(s: ControlSnapshot): NodeMessage & Record<string, unknown> {
  return { topic: s.target.token, payload: s.state, wanted: s.wanted, reason: s.reason, session: s.session, target: { ...s.target }, ...(s.depot !== undefined ? { depot: s.depot && { ...s.depot } } : {}) };
}

const FILL: Record<ControlSnapshot['state'], Pick<NodeStatus, 'fill' | 'shape'>> = {
  idle: { fill: 'grey', shape: 'ring' },
  queued: { fill: 'yellow', shape: 'ring' },
  starting: { fill: 'blue', shape: 'ring' },
  charging: { fill: 'green', shape: 'dot' },
  stopping: { fill: 'blue', shape: 'ring' },
  guard: { fill: 'yellow', shape: 'ring' },
  failed: { fill: 'red', shape: 'ring' },
  busy: { fill: 'yellow', shape: 'dot' },
  done: { fill: 'green', shape: 'ring' },
};

/** The connectors the control nodes of this runtime control (two on one are told). */
const claims = new ConnectorClaims();

/** The badge of a target: "on → charging 4.2 kWh", "off → stopping 2/3", "on → guard 2:40". */
export function controlBadge(s: ControlSnapshot, count: number, now: number, twoNodes = false): NodeStatus {
  const words: Record<string, StatusKey> = { state: `control.state.${s.state}` as StatusKey };
  if (s.wanted !== null) words.wanted = s.wanted ? 'control.on' : 'control.off';
  let detail = '';
  if (s.state === 'charging') detail = formatEnergy(s.session?.energyKWh ?? null);
  else if (s.state === 'guard') detail = clockText(Math.max(0, (s.guardLeftMs ?? 0) - (now - s.at)));
  else if (counting(s)) {
    words.note = 'control.nextStart';
    detail = clockText(Math.max(0, (s.startInMs ?? 0) - (now - s.at)));
  }
  else if ((s.state === 'starting' || s.state === 'stopping') && s.attempt && s.attempt.n > 0) detail = `${s.attempt.n}/${s.attempt.of}`;
  else if (s.state === 'queued' && s.depot?.position) detail = `${s.depot.position}/${s.depot.waiting}`;
  else if (s.state === 'idle' && s.reason === ENDED_AT_STATION) words.detail = 'control.endedAtStation';
  if (twoNodes) words.detail = 'control.twoNodes';
  const values = { detail, count, token: s.target.token, wanted: '', note: '' };
  return { ...FILL[s.state], key: count > 1 ? 'control.badgeTargets' : 'control.badge', values, words, stamp: s.state !== 'guard' && !counting(s) };
}

/** A badge that counts down to the next START (failed or busy, the retry or the bound on STARTs holding it back). */
const counting = (s: ControlSnapshot): boolean => (s.state === 'failed' || s.state === 'busy') && s.startInMs !== undefined;

/** The target when every field is a literal set in the node: then the node serves it alone. */
function fixedTarget(config: ControlConfig): ControlTarget | undefined {
  const fields = literalFields(typedFields(config, ['locationId', 'evseId', 'token'] as const));
  if (!fields || typeof fields.locationId !== 'string' || typeof fields.evseId !== 'string' || typeof fields.token !== 'string') return undefined;
  try {
    return resolveFields(['locationId', 'evseId', 'token'] as const, fields, undefined);
  } catch {
    return undefined; // a field the node cannot use: every message says so
  }
}

function clockText(ms: number): string {
  const sec = Math.ceil(ms / 1000);
  return `${Math.floor(sec / 60)}:${String(sec % 60).padStart(2, '0')}`;
}

export class ControlMode {
  private shown: ControlSnapshot | null = null;
  private ticker: NodeJS.Timeout | null = null;
  /** another control node of this runtime controls a connector of this one */
  private twoNodes = false;
  /** stops the metrics reading this node's figures */
  private unread: () => void = () => undefined;

  private constructor(
    private readonly node: Node,
    private readonly life: NodeLifecycle,
    private readonly book: ControlBook,
    private readonly client: () => ServiceClient,
    private readonly checkSec: number,
    private readonly service: string,
    /** which targets this process commands, where their memory is kept, where a wish goes (alone: all, context, here) */
    private readonly share: ControlShare,
    private readonly depot: ControlDepot,
  ) {}

  /** Takes up the kept targets and checks them (those this process holds, when replicas share them). */
  static start(RED: NodeAPI, node: Node, config: ControlConfig, life: NodeLifecycle): ControlMode {
    const fixed = fixedTarget(config);
    const floor = chargingSessionSettings(RED.settings).minPollIntervalSec;
    const { settings, raised, unreadLimit } = controlSettings(config, floor);
    if (raised) node.warn(raised);
    if (unreadLimit) node.warn(unreadLimit);
    const client = () => getService(RED, config.service).getClient();
    let derive;
    try {
      derive = getService(RED, config.service).deriveOptions;
    } catch {
      // no configuration: every message says so (CONFIG), nothing is sent
    }
    let mode: ControlMode | null = null;
    const coordination = coordinationOf(RED, config);
    const share = openControlShare(coordination.leases, node.id, life.voice(), new ContextControlStore(node, config.contextStore));
    const reach = reachReporter(coordination.reach, (t: ControlTarget) => client().getProgress(t.token, { signal: life.signal, priority: 'poll' }));
    life.onClose(() => reach.withdraw());
    const poll = (t: ControlTarget, priority: CheckPriority) =>
      client()
        .getProgress(t.token, { signal: life.signal, priority })
        .then(
          (r) => (reach.polled(t, null), r.record),
          (err: unknown) => {
            reach.polled(t, err instanceof ChargingError ? err : null);
            throw err;
          },
        );
    const depot = controlDepot(RED, node, config, settings, realClock, (key) => void mode?.book.get(key)?.check('command'));
    const deps: ControlDeps = {
      poll,
      send: (command, mayProceed) => client().sendCommand(command, { signal: life.signal, mayProceed }),
      clock: realClock,
      derive,
      onState: (snapshot, changed) => mode?.onState(snapshot, changed),
      onError: (t, err) => life.report(err, t.token ? { topic: t.token, target: { ...t } } as NodeMessage : undefined),
      track: (work) => life.track(work),
      ...share.deps(),
      ...(depot.hook ? { depot: depot.hook } : {}),
    };
    mode = new ControlMode(node, life, new ControlBook(settings, deps, fixed), client, settings.checkMs / 1000, config.service, share, depot);
    const m = mode;
    share.attach(m.book, settings, () => m.demand());
    try {
      m.unread = getService(RED, config.service).metrics.read('control', () => m.figures());
    } catch {
      // no configuration: no figures
    }
    if (depot.problem) life.board.set(Status.error(depot.problem));
    else life.board.set({ fill: 'grey', shape: 'ring', key: 'control.waiting' });
    if (fixed) m.claim(fixed);
    void m.book.whenReady().then(() => m.demand());
    life.onClose((removed) => m.close(removed));
    return mode;
  }

  /**
   * A wish for a target. Resolves when the check it causes is done (within the
   * message budget: a check still on the wire after it reports to Catch by
   * itself); rejects with that check's failure.
   */
  async want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<void> {
    if (this.depot.problem) throw this.depot.problem;
    this.claim(target);
    // Shared: the wish is posted for the holder, which checks (and reports to Catch) by itself.
    const check = this.share.want(target, wanted, opts);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), DEFAULT_RETRY.maxTotalMs);
    });
    const first = await Promise.race([check, late]).finally(() => clearTimeout(timer));
    this.demand();
    if (first === 'late') {
      void check.then((err) => err && this.life.report(err, { topic: target.token, target: { ...target } } as NodeMessage), (err: unknown) => this.life.report(err));
      return;
    }
    if (first) throw first as ChargingError;
  }

  /** This node controls the target's connector: a second node on it is said in the log and on both badges. */
  private claim(target: ControlTarget): void {
    claims.claim(ConnectorClaims.key(this.service, target.locationId, target.evseId), {
      id: this.node.id,
      conflict: (other) => {
        this.node.warn(`Another charging-control node (${other}) controls the same connector with the same configuration: each may stop the other's sessions and take them for ended at the station. Use one control node per connector.`);
        this.twoNodes = true;
        if (this.shown) this.badge();
        else this.life.board.set({ fill: 'yellow', shape: 'ring', key: 'control.twoNodes' });
      },
    });
  }

  private onState(snapshot: ControlSnapshot, changed: boolean): void {
    if (changed) this.life.emit(controlMessage(snapshot));
    this.shown = snapshot;
    this.badge();
  }

  private badge(): void {
    const s = this.shown;
    if (!s) return;
    this.life.board.set(controlBadge(s, this.book.size, monotonicNow(), this.twoNodes));
    // A countdown (the guard, the next START) moves once a second while it is shown; no timer otherwise.
    const countdown = s.state === 'guard' || counting(s);
    if (countdown && !this.ticker) {
      this.ticker = setInterval(() => this.badge(), 1000);
      this.ticker.unref?.();
    } else if (!countdown && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = null;
    }
  }

  /** Tells the request budget how many checks per second this node makes, as watch mode does. */
  demand(): void {
    try {
      this.client().setPollDemand(this.node.id, this.book.size / this.checkSec);
    } catch {
      // no configuration: nothing is polled
    }
  }

  /** Its connectors by state, for a metrics scrape (each state said, 0 too; a connector before its first check is not counted). */
  private figures(): ControlFigures {
    const out: ControlFigures = Object.fromEntries(CONTROL_STATES.map((s) => [s, 0]));
    for (const c of this.book.controllers()) {
      const state = c.snapshot?.state;
      if (state) out[state] = (out[state] ?? 0) + 1;
    }
    return out;
  }

  private close(removed: boolean): Promise<void> {
    this.unread();
    this.depot.close(removed, [...this.book.controllers()].map((c) => c.key));
    this.book.close();
    claims.release(this.node.id);
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
    try {
      this.client().setPollDemand(this.node.id, 0);
    } catch {
      // the configuration is gone too
    }
    return this.share.close(removed);
  }
}

/** The configuration's coordination; without a configuration, alone (every message says what is missing). */
function coordinationOf(RED: NodeAPI, config: ControlConfig): Coordination {
  try {
    return getService(RED, config.service).getCoordination();
  } catch {
    return new LocalCoordination();
  }
}
