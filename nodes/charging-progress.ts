import { setMaxListeners } from 'node:events';
import type { NodeAPI, Node, NodeDef, NodeMessage } from 'node-red';
import { evaluateFields, getService, runNode, typedField } from './common/node-support';
import { deriveSession, resolveFields, normaliseField } from './lib/session';
import { Status, formatKWh } from './lib/status';
import { ChargingError } from './lib/errors';
import { SessionWatcher, WatchEvent } from './lib/session-watcher';

interface ProgressConfig extends NodeDef {
  service: string;
  mode?: 'query' | 'watch';
  watchTokens?: string;
  interval?: string | number;
  emitEveryPoll?: boolean;
  splitOutputs?: boolean;
}

/** Shortest poll interval, unless settings.js says otherwise: protects the operator's rate limits. */
const DEFAULT_MIN_INTERVAL_SEC = 5;

/**
 * Flow-context key of the tokens added by message. Node context is deleted each
 * time a node closes; flow context survives a redeploy (and, with a persistent
 * context store, a restart).
 */
const watchedKey = (node: Node) => `charging-watch-${node.id}`;

const OUTPUT_OF_EVENT: Record<string, number> = { pending: 0, started: 0, updated: 1, poll: 1, ended: 2 };

export = function register(RED: NodeAPI): void {
  function ChargingProgress(this: Node, config: ProgressConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = { token: typedField(raw, 'token') };
    const split = config.mode === 'watch' && config.splitOutputs === true;
    let lastWarning = '';
    let watcher: SessionWatcher | null = null;

    const warnOnce = (warnings: string[]) => {
      const warning = warnings.join('; ');
      if (warning && warning !== lastWarning) node.warn(warning);
      lastWarning = warning;
    };

    /** Sends to the output for this event: one output, or three when split. */
    const route = (msg: NodeMessage, event?: string): NodeMessage | Array<NodeMessage | null> => {
      if (!split) return msg;
      const outs: Array<NodeMessage | null> = [null, null, null];
      outs[event ? OUTPUT_OF_EVENT[event] : 0] = msg;
      return outs;
    };

    if (config.mode === 'watch') {
      watcher = startWatching(RED, node, config, (e) => {
        if (e.session) warnOnce(e.session.warnings);
        const msg: NodeMessage & Record<string, unknown> = { topic: e.token, event: e.event, payload: e.record, session: e.session };
        node.send(route(msg, e.event));
        const n = watcher?.size ?? 0;
        const text = e.event === 'ended' ? `ended ${e.token}` : e.session?.energyKWh != null ? `${e.token} ${formatKWh(e.session.energyKWh)}` : `${e.event} ${e.token}`;
        node.status(Status.ok(`watching ${n} · ${text}`));
      });
    }

    runNode(RED, node, config.service, async (msg, ctx) => {
      if (watcher && (msg.topic === 'watch' || msg.topic === 'unwatch')) {
        const tokens = tokensFrom(msg.payload);
        if (msg.topic === 'unwatch' && (msg.payload === '*' || msg.payload === 'all')) watcher.unwatchAll();
        else if (tokens.length === 0) throw new ChargingError('MISSING_FIELD', `msg.payload must name the token(s) to ${msg.topic}: a string, {token}, a progress record or an array of these`, { field: 'token' });
        for (const t of tokens) {
          if (msg.topic === 'watch') watcher.watch(t);
          else watcher.unwatch(t);
        }
        node.context().flow.set(watchedKey(node), watcher.tokens());
        ctx.setStatus(Status.ok(`watching ${watcher.size}`));
        return null;
      }
      const set = await evaluateFields(RED, node, fields, msg);
      const { token } = resolveFields(['token'] as const, set, msg.payload);
      ctx.setStatus(Status.requesting('querying'));
      const res = await ctx.client.getProgress(token, { signal: ctx.signal });
      const out = msg as typeof msg & { statusCode?: number; session?: unknown };
      out.statusCode = res.statusCode;
      if (res.record === null) {
        // DESIGN §2 "No active session": not an error.
        ctx.setStatus(Status.idle('no session'));
        out.payload = null;
        out.session = null;
        return route(out);
      }
      const session = deriveSession(res.record, ctx.service.deriveOptions);
      warnOnce(session.warnings);
      ctx.setStatus(session.pending ? Status.waiting('pending: not started yet') : Status.ok(`charging ${formatKWh(session.energyKWh)}`.trim()));
      out.payload = res.record; // as the service returned it (DESIGN §2)
      out.session = session;
      return route(out);
    });
  }
  RED.nodes.registerType('charging-progress', ChargingProgress);
};

function startWatching(RED: NodeAPI, node: Node, config: ProgressConfig, onEvent: (e: WatchEvent) => void): SessionWatcher | null {
  const settings = (RED.settings as unknown as { chargingSession?: { minPollIntervalSec?: number } }).chargingSession;
  const floor = typeof settings?.minPollIntervalSec === 'number' ? settings.minPollIntervalSec : DEFAULT_MIN_INTERVAL_SEC;
  const wanted = Number(config.interval ?? 10);
  const intervalSec = Math.max(floor, Number.isFinite(wanted) ? wanted : 10);
  if (intervalSec > wanted) node.warn(`Poll interval raised from ${wanted} s to the minimum of ${floor} s`);
  let service;
  let client;
  try {
    service = getService(RED, config.service);
    client = service.getClient();
  } catch (err) {
    node.status(Status.error(err));
    node.error((err as Error).message);
    return null;
  }
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const watcher = new SessionWatcher(
    async (token) => (await client.getProgress(token, { signal: controller.signal })).record,
    { intervalMs: intervalSec * 1000, emitEveryPoll: config.emitEveryPoll === true, derive: service.deriveOptions },
    onEvent,
    (token, err) => {
      node.status(Status.error(err));
      node.error(err, { topic: token, payload: { token } } as NodeMessage);
    },
  );
  const remembered = node.context().flow.get(watchedKey(node));
  const fromMessages = Array.isArray(remembered) ? remembered.filter((t): t is string => typeof t === 'string') : [];
  for (const t of [...(config.watchTokens ?? '').split(/[\s,]+/).filter(Boolean), ...fromMessages]) {
    try {
      watcher.watch(normaliseField('token', t, 'the node'));
    } catch (err) {
      node.error((err as Error).message);
    }
  }
  node.on('close', (removed: boolean, done: () => void) => {
    controller.abort();
    watcher.close();
    if (removed) node.context().flow.set(watchedKey(node), undefined);
    done();
  });
  node.status(Status.ok(`watching ${watcher.size}`));
  return watcher;
}

/** Tokens named by a watch/unwatch message: a string, {token}, {tokenId}, or an array of these. */
function tokensFrom(payload: unknown): string[] {
  const list = Array.isArray(payload) ? payload : [payload];
  const out: string[] = [];
  for (const item of list) {
    if (typeof item === 'string' && item.trim() !== '') out.push(normaliseField('token', item, 'msg.payload'));
    else if (item && typeof item === 'object') {
      const f = resolveFields(['token'] as const, {}, item);
      out.push(f.token);
    }
  }
  return out;
}
