/**
 * Watch mode of charging-progress: a SessionWatcher fed with the tokens set in
 * the node and those added by message, its events sent as messages, its
 * failures reported through the node's lifecycle like any other error.
 */
import type { Node, NodeAPI, NodeMessage } from 'node-red';
import type { ServiceClient } from '../lib/client/service-client';
import { POLL_SHARE } from '../lib/client/request-budget';
import { ChargingError } from '../lib/errors';
import { normaliseField, tokensFrom } from '../lib/session/inputs';
import { SessionWatcher, WatchEvent } from '../lib/session/watcher';
import type { NodeLifecycle, Outputs } from './run-node';
import { getService } from './service-node';
import { formatEnergy, Status } from './status';

export interface WatchConfig {
  service: string;
  watchTokens?: string;
  interval?: string | number;
  emitEveryPoll?: boolean;
}

/** Shortest poll interval, unless settings.js says otherwise: protects the operator's rate limits. */
export const DEFAULT_MIN_INTERVAL_SEC = 5;

/**
 * Flow-context key of the tokens added by message. Node context is deleted each
 * time a node closes; flow context survives a redeploy (and, with a persistent
 * context store, a restart).
 */
export const watchedKey = (node: Node): string => `charging-watch-${node.id}`;

export class WatchMode {
  private constructor(
    private readonly node: Node,
    private readonly watcher: SessionWatcher,
    private readonly life: NodeLifecycle,
    private readonly budget: { client: Pick<ServiceClient, 'setPollDemand' | 'pollStretch' | 'requestRate'>; intervalSec: number },
  ) {}

  /** Starts polling, or reports why it cannot (no usable configuration) and returns null. */
  static start(RED: NodeAPI, node: Node, config: WatchConfig, life: NodeLifecycle, toOutputs: (msg: NodeMessage, event: string) => Outputs): WatchMode | null {
    const settings = (RED.settings as unknown as { chargingSession?: { minPollIntervalSec?: number } }).chargingSession;
    const floor = typeof settings?.minPollIntervalSec === 'number' ? settings.minPollIntervalSec : DEFAULT_MIN_INTERVAL_SEC;
    const wanted = Number(config.interval ?? 10);
    const intervalSec = Math.max(floor, Number.isFinite(wanted) ? wanted : 10);
    if (intervalSec > wanted) node.warn(`Poll interval raised from ${wanted} s to the minimum of ${floor} s`);
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
    const watcher = new SessionWatcher(
      async (token) => (await client.getProgress(token, { signal: life.signal, priority: 'poll' })).record,
      { intervalMs: intervalSec * 1000, emitEveryPoll: config.emitEveryPoll === true, derive: service.deriveOptions, stretch: () => client.pollStretch() },
      (e) => mode?.onEvent(e, toOutputs),
      (token, err) => life.report(err, { topic: token, payload: { token } }),
    );
    mode = new WatchMode(node, watcher, life, { client, intervalSec });
    mode.add([...(config.watchTokens ?? '').split(/[\s,]+/).filter(Boolean), ...mode.remembered()], 'the node');
    life.onClose((removed) => {
      watcher.close();
      client.setPollDemand(node.id, 0);
      if (removed) node.context().flow.set(watchedKey(node), undefined);
    });
    life.board.set(Status.ok('watching', { count: watcher.size }));
    return mode;
  }

  /** msg.topic "watch" / "unwatch" with the token(s) in msg.payload ("*" or "all" unwatches every one). */
  command(topic: 'watch' | 'unwatch', payload: unknown): void {
    if (topic === 'unwatch' && (payload === '*' || payload === 'all')) {
      this.watcher.unwatchAll();
    } else {
      const tokens = tokensFrom(payload);
      if (tokens.length === 0) {
        throw new ChargingError('MISSING_FIELD', `msg.payload must name the token(s) to ${topic}: a string, {token}, a progress record or an array of these`, { field: 'token' });
      }
      if (topic === 'watch') this.watcher.watch(tokens);
      else this.watcher.unwatch(tokens);
    }
    this.node.context().flow.set(watchedKey(this.node), this.watcher.tokens());
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
    client.setPollDemand(this.node.id, this.watcher.size / intervalSec);
    const stretch = client.pollStretch();
    if (stretch <= 1) return;
    const rate = client.requestRate;
    this.life.warnOnce(
      'budget',
      `Watching ${this.watcher.size} tokens every ${intervalSec} s needs ${fmt(this.watcher.size / intervalSec)} requests/s, more than Max requests per second (${fmt(rate.limit)}, ${Math.round(POLL_SHARE * 100)} % of it for watch polls, shared by every watch node of this configuration) allows: each token is polled every ${fmt(intervalSec * stretch)} s instead`,
    );
  }

  private add(tokens: string[], from: string): void {
    const valid: string[] = [];
    for (const t of tokens) {
      try {
        valid.push(normaliseField('token', t, from));
      } catch (err) {
        this.life.report(err);
      }
    }
    this.watcher.watch(valid);
    this.demand();
  }

  private remembered(): string[] {
    const stored = this.node.context().flow.get(watchedKey(this.node));
    return Array.isArray(stored) ? stored.filter((t): t is string => typeof t === 'string') : [];
  }

  private onEvent(e: WatchEvent, toOutputs: (msg: NodeMessage, event: string) => Outputs): void {
    if (e.session && e.session.warnings.length > 0) this.life.warnOnce('record', e.session.warnings.join('; '));
    const msg: NodeMessage & Record<string, unknown> = { topic: e.token, event: e.event, payload: e.record, session: e.session };
    this.life.emit(toOutputs(msg, e.event));
    const values = { count: this.watcher.size, token: e.token, event: e.event, energy: formatEnergy(e.session?.energyKWh ?? null) };
    this.life.board.set(Status.ok(e.event === 'ended' ? 'watchingEnded' : values.energy ? 'watchingEnergy' : 'watchingEvent', values));
  }
}

const fmt = (n: number): string => String(Math.round(n * 100) / 100);
