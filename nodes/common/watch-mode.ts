/**
 * Watch mode of charging-progress: a SessionWatcher fed with the tokens set in
 * the node and those added by message, its events sent as messages, its
 * failures reported through the node's lifecycle like any other error.
 */
import type { Node, NodeAPI, NodeMessage } from 'node-red';
import type { ProgressResult } from '../lib/client/answers';
import type { RequestOptions, ServiceClient } from '../lib/client/service-client';
import type { ProgressRecord } from '../lib/session/record';
import { POLL_SHARE } from '../lib/client/request-budget';
import { ChargingError } from '../lib/errors';
import { normaliseField, tokensFrom } from '../lib/session/inputs';
import type { PollFn } from '../lib/session/wait';
import { chargingSessionSettings } from '../lib/settings';
import { SessionWatcher, WatchEvent } from '../lib/session/watcher';
import type { NodeLifecycle, Outputs } from './node-lifecycle';
import { getService } from './service-node';
import { formatEnergy, NodeStatus, Status } from './status';
import { WATCH_STATUS_GAP_MS } from './status-board';
import { KeptToken, WatchStore } from './watch-store';
import { WatchShare, type WatchView } from '../lib/session/watch-share';
import { reachReporter } from '../lib/coordination/reach';
import type { WatchMetrics } from '../lib/metrics/observers';

export interface WatchConfig {
  service: string;
  watchTokens?: string;
  interval?: string | number;
  emitEveryPoll?: boolean;
  /** context store of the watch list and each token's last reported state; empty = the default store */
  contextStore?: string;
}

export class WatchMode {
  private constructor(
    private readonly node: Node,
    private readonly watcher: SessionWatcher,
    private readonly life: NodeLifecycle,
    private readonly store: WatchStore,
    private readonly budget: { client: Pick<ServiceClient, 'setPollDemand' | 'pollStretch' | 'requestRate'>; intervalSec: number },
    /** which of the node's tokens this process polls (alone: all of them) */
    private readonly share: WatchShare,
    private readonly metrics: WatchMetrics,
  ) {}

  /** Starts polling, or reports why it cannot (no usable configuration) and returns null. */
  static start(RED: NodeAPI, node: Node, config: WatchConfig, life: NodeLifecycle, toOutputs: (msg: NodeMessage, event: string) => Outputs): WatchMode | null {
    const intervalSec = pollInterval(RED, node, config);
    let client;
    let service;
    try {
      service = getService(RED, config.service);
      client = service.getClient();
    } catch (err) {
      life.report(err);
      return null;
    }
    let mode: WatchMode | null = null;
    const pollOptions = { signal: life.signal, priority: 'poll' } as const;
    const coordination = service.getCoordination();
    const share = new WatchShare(coordination.leases, node.id, {
      voice: life.voice(),
      show: (view) => life.board.set(watchBadge(view)),
    });
    const reach = reachReporter(coordination.reach, (token: string) => client.getProgress(token, pollOptions));
    const store = new WatchStore(node, config.contextStore, (err) => life.warnOnce('context', `Could not keep the watch state in context: ${err.message}`));
    const watcher = new SessionWatcher(
      progressPoll(client, pollOptions),
      {
        intervalMs: intervalSec * 1000,
        emitEveryPoll: config.emitEveryPoll === true,
        derive: service.deriveOptions,
        stretch: () => client.pollStretch(),
        onState: (token, state) => store.state(token, state),
        // The deferred badge and the batched states ride on the watcher's wake-ups: no timers of their own.
        onTick: () => {
          life.board.due();
          store.flushDue();
        },
        onPolled: reach.polled,
        ...share.watcherOptions(),
      },
      (e) => mode?.onEvent(e, toOutputs),
      (token, err) => life.report(err, token ? { topic: token, payload: { token } } : undefined),
    );
    mode = new WatchMode(node, watcher, life, store, { client, intervalSec }, share, service.metrics);
    const unread = service.metrics.read('watch', () => ({ watched: watcher.size, charging: watcher.charging }));
    share.attach(watcher, () => mode?.demand());
    life.board.setGap(WATCH_STATUS_GAP_MS);
    const own = (config.watchTokens ?? '').split(/[\s,]+/).filter(Boolean);
    store.load((kept) => mode?.resume(own, kept));
    life.onClose((removed) => {
      reach.withdraw();
      unread();
      watcher.close();
      client.setPollDemand(node.id, 0);
      // The states of the last second are kept before a redeploy or a stop (Node-RED then closes the context).
      if (removed) store.clear(true);
      else store.flush();
      store.close();
      return share.close(removed);
    });
    return mode;
  }

  /** msg.topic "watch" / "unwatch" with the token(s) in msg.payload ("*" or "all" unwatches every one). */
  command(topic: 'watch' | 'unwatch', payload: unknown): void {
    if (topic === 'unwatch' && (payload === '*' || payload === 'all')) {
      this.share.unwatchAll();
      this.store.clear();
    } else {
      const tokens = tokensFrom(payload);
      if (tokens.length === 0) {
        throw new ChargingError('MISSING_FIELD', `msg.payload must name the token(s) to ${topic}: a string, {token}, a progress record or an array of these`, { field: 'token' });
      }
      if (topic === 'watch') {
        this.share.watch(tokens);
        this.store.added(tokens);
      } else {
        this.share.unwatch(tokens);
        this.store.removed(tokens);
      }
    }
    this.life.board.set(Status.ok('watching', { count: this.watcher.size }));
    this.demand();
  }

  /**
   * Tells the request budget how many polls per second this node would like,
   * and says once (with the figures) when Max requests per second makes every
   * watch schedule stretch instead of queueing polls without end.
   */
  private demand(): void {
    const { client, intervalSec } = this.budget;
    // Shared: the fleet's whole list, so that every replica stretches its share alike and the fleet fits its budget.
    const watched = this.share.total;
    client.setPollDemand(this.node.id, watched / intervalSec);
    const stretch = client.pollStretch();
    if (stretch <= 1) return;
    const rate = client.requestRate;
    this.life.warnOnce(
      'budget',
      `Watching ${watched} tokens every ${intervalSec} s needs ${fmt(watched / intervalSec)} requests/s, more than Max requests per second (${fmt(rate.limit)}, ${Math.round(POLL_SHARE * 100)} % of it for watch polls, shared by every watch node of this configuration) allows: each token is polled every ${fmt(intervalSec * stretch)} s instead`,
    );
  }

  /**
   * The tokens set in the node and those kept from before (added by message),
   * each with its last reported state; kept tokens that are neither any more
   * are forgotten.
   */
  private resume(own: string[], kept: Map<string, KeptToken>): void {
    const valid = new Set<string>();
    for (const t of own) {
      try {
        valid.add(normaliseField('token', t, 'the node'));
      } catch (err) {
        this.life.report(err);
      }
    }
    const stale: string[] = [];
    for (const [token, k] of kept) {
      if (k.msg) valid.add(token);
      else if (!valid.has(token)) stale.push(token);
    }
    this.store.removed(stale);
    // What was last reported, not what was loaded: a seed after Redis lost its data must not repeat a started or lose an ended.
    this.share.resume([...valid], (token) => this.store.lastState(token));
    this.life.board.set(Status.ok('watching', { count: this.watcher.size }));
    this.demand();
  }

  private onEvent(e: WatchEvent, toOutputs: (msg: NodeMessage, event: string) => Outputs): void {
    if (e.session && e.session.warnings.length > 0) this.life.warnOnce('record', e.session.warnings.join('; '));
    const msg: NodeMessage & Record<string, unknown> = { topic: e.token, event: e.event, payload: e.record, session: e.session };
    if (this.life.isClosed) return;
    this.life.emit(toOutputs(msg, e.event));
    this.metrics.emitted(e.event);
    this.life.board.defer(() => {
      const values = { count: this.watcher.size, token: e.token, event: e.event, energy: formatEnergy(e.session?.energyKWh ?? null) };
      return Status.ok(e.event === 'ended' ? 'watchingEnded' : values.energy ? 'watchingEnergy' : 'watchingEvent', values);
    });
  }
}

/** The badge of a shared list: this replica's share of the whole, or Redis away. */
/** The node's interval, raised to the runtime's floor (with a warning). */
function pollInterval(RED: NodeAPI, node: Node, config: WatchConfig): number {
  const floor = chargingSessionSettings(RED.settings).minPollIntervalSec;
  const wanted = Number(config.interval ?? 10);
  const intervalSec = Math.max(floor, Number.isFinite(wanted) ? wanted : 10);
  if (intervalSec > wanted) node.warn(`Poll interval raised from ${wanted} s to the minimum of ${floor} s`);
  return intervalSec;
}

function watchBadge(view: WatchView): NodeStatus {
  return view.up ? Status.ok('watchingFleet', { count: view.count, total: view.total }) : Status.warn('fleetDown', { count: view.count });
}

/** A watcher's poll: the progress query at poll priority, its record (null: no session). */
export function progressPoll(client: Pick<ServiceClient, 'getProgress'>, options: RequestOptions): PollFn {
  return (token, _signal, mayProceed) => client.getProgress(token, mayProceed ? { ...options, mayProceed } : options).then(recordOf);
}

const recordOf = (res: ProgressResult): ProgressRecord | null => res.record;

const fmt = (n: number): string => String(Math.round(n * 100) / 100);

