/**
 * charging-control's depot (its `depot` setting): the link to the depot's
 * grants for its controllers, or, for a depot that cannot work (no limit, two
 * services), the configuration error said at deploy in the log and on the
 * badge, every wish refused with it and no START through it.
 */
import type { Node, NodeAPI } from 'node-red';
import type { ControlClock } from '../lib/control/controller';
import type { ControlSettings } from '../lib/control/memory';
import { DepotLink, type DepotHook } from '../lib/depot/link';
import { nodePriority } from '../lib/depot/settings';
import { ChargingError } from '../lib/errors';
import { getDepot } from './depot-node';

export interface ControlDepot {
  /** what the controllers ask (absent: no depot, no limit) */
  hook?: DepotHook;
  /** why the node refuses every wish (null: none) */
  problem: ChargingError | null;
  /** the node was removed: its targets' entries go (a redeploy keeps them) */
  close(removed: boolean, keys: string[]): void;
}

/** A depot that cannot grant: nothing starts through it, nothing is counted. */
function refusing(err: ChargingError): DepotHook {
  const word = { view: null, granted: false, reason: `not started: ${err.message}` };
  return {
    hold: () => Promise.resolve({ view: null }),
    ask: () => Promise.resolve(word),
    release: () => Promise.resolve({ view: null }),
    unread: () => undefined,
  };
}

export function controlDepot(RED: NodeAPI, node: Node, config: { depot?: string; priority?: unknown; service?: string }, settings: ControlSettings, clock: ControlClock, poke: (key: string) => void): ControlDepot {
  let problem: ChargingError | null = null;
  let hook: DepotHook | undefined;
  let link: DepotLink | null = null;
  try {
    const depot = getDepot(RED, config.depot);
    if (!depot) return { problem: null, close: () => undefined };
    if ('error' in depot.depot) throw depot.depot.error;
    link = new DepotLink({
      pool: depot.pool(),
      settings: depot.depot.settings,
      priority: nodePriority(config.priority),
      checkMs: settings.checkMs,
      waitMs: settings.waitMs,
      clock,
      warn: (text) => node.warn(text),
      log: (text) => node.log(text),
      poke,
    });
    hook = link;
  } catch (err) {
    problem = err instanceof ChargingError ? err : new ChargingError('CONFIG', String((err as Error)?.message ?? err));
    node.error(`Depot: ${problem.message}`);
    hook = refusing(problem);
  }
  const l = link;
  return {
    hook,
    problem,
    close(removed, keys) {
      l?.close();
      if (removed && l) for (const key of keys) void l.release(key).catch(() => undefined);
    },
  };
}
