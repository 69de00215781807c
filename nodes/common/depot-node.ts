/**
 * A charging-depot configuration node's Node-RED side: its settings, the
 * control nodes that name it (their charging-service and context store, read
 * from the deployed flows), and its grants through that service's
 * Coordination, kept in that context store while the process is alone.
 */
import type { Node, NodeAPI } from 'node-red';
import type { GrantPool, GrantTable } from '../lib/coordination/grants';
import type { DepotFigures } from '../lib/metrics/figures';
import { configurationLabel } from '../lib/metrics/labels';
import { depotSettings, type DepotConfig, type DepotSettings } from '../lib/depot/settings';
import { ChargingError } from '../lib/errors';
import { ContextGrantStore } from './context-grant-store';
import { getService } from './service-node';

/** The public face of a charging-depot config node. */
export interface ChargingDepotNode extends Node {
  /** the settings, or the configuration error that keeps the depot from granting anything */
  readonly depot: { settings: DepotSettings } | { error: ChargingError };
  /** the charging-service its control nodes use (null: none yet) */
  readonly serviceId: string | null;
  /** the depot's grants (throws the configuration error) */
  pool(): GrantPool;
}

export function getDepot(RED: NodeAPI, id: string | undefined): ChargingDepotNode | null {
  if (!id) return null;
  const depot = RED.nodes.getNode(id) as ChargingDepotNode | null;
  if (!depot || typeof depot.pool !== 'function') throw new ChargingError('CONFIG', 'The charging-depot this node names is not deployed (or was deleted): nothing is started until it is', { field: 'depot' });
  return depot;
}

/** The control nodes that name this depot, as deployed: their services and the context store they keep state in. */
function controlNodesOf(RED: NodeAPI, depotId: string): { services: string[]; store: string | undefined } {
  const services = new Set<string>();
  let store: string | undefined;
  RED.nodes.eachNode((n) => {
    const c = n as unknown as { type: string; depot?: string; service?: string; contextStore?: string; d?: boolean };
    if (c.type !== 'charging-control' || c.depot !== depotId || c.d === true) return;
    if (c.service) services.add(c.service);
    store ??= c.contextStore || undefined;
  });
  return { services: [...services], store };
}

/** Sets up a depot node: reads its settings and its control nodes, says what is wrong at deploy (log and badge of each control node). */
export function setUpDepot(RED: NodeAPI, node: Node, config: DepotConfig): void {
  const self = node as ChargingDepotNode & { depot: ChargingDepotNode['depot']; serviceId: string | null };
  const { services, store } = controlNodesOf(RED, node.id);
  let depot: ChargingDepotNode['depot'];
  try {
    const { settings, warnings } = depotSettings(config);
    for (const w of warnings) node.warn(w);
    depot = { settings };
  } catch (err) {
    depot = { error: err instanceof ChargingError ? err : new ChargingError('CONFIG', String((err as Error)?.message ?? err)) };
  }
  if ('settings' in depot && services.length > 1) {
    // Grants are shared through one configuration's coordination: two would keep two tables, each under its own limit.
    depot = { error: new ChargingError('CONFIG', `The control nodes of this depot use ${services.length} different charging-service configurations: a depot counts through one; use the same configuration in all of them (nothing is started through this depot until then)`, { field: 'service' }) };
  }
  if ('error' in depot) node.error(depot.error.message);
  self.depot = depot;
  self.serviceId = services[0] ?? null;
  const grantStore = new ContextGrantStore(node, store);
  const seen = new WeakMap<GrantPool, GrantPool>();
  const last: { table: GrantTable | null } = { table: null };
  let unread: () => void = () => undefined;
  node.on('close', () => unread());
  self.pool = (): GrantPool => {
    if ('error' in depot) throw depot.error;
    if (!self.serviceId) throw new ChargingError('CONFIG', 'No charging-control node uses this depot yet: its table lives with their charging-service configuration');
    const service = getService(RED, self.serviceId);
    const pool = service.getCoordination().grants.open(node.id, grantStore);
    let kept = seen.get(pool);
    if (!kept) {
      const s = depot.settings;
      void pool.configure({ limit: s.limit, budgetKW: s.budgetKW, agingMs: s.agingMs });
      kept = keepingTable(pool, last);
      seen.set(pool, kept);
      // The metrics read the table the depot's last operation answered: nothing is asked of the store at a scrape.
      const label = configurationLabel(node.name, node.id);
      unread = service.metrics.read('depot', () => depotFigures(label, last.table));
    }
    return kept;
  };
}

/** The pool, keeping the table each of its answers shows. */
function keepingTable(pool: GrantPool, last: { table: GrantTable | null }): GrantPool {
  const keep = <T extends { ok: boolean }>(a: T): T => ((last.table = a.ok ? (a as unknown as { table: GrantTable }).table : last.table), a);
  return {
    sync: (key, op) => pool.sync(key, op).then(keep),
    configure: (rules) => pool.configure(rules),
    setLimit: (limit) => pool.setLimit(limit).then(keep),
    list: () => pool.list().then(keep),
    onChange: (fn) => pool.onChange(fn),
  };
}

/** A depot's figures for a metrics scrape; none before its first answer (left out, not a made-up 0). */
function depotFigures(depot: string, t: GrantTable | null): DepotFigures {
  if (!t) throw new Error('no table yet');
  return { depot, inUse: t.inUse, waiting: t.waiting, usedKW: t.usedKW, ...(t.limit !== null ? { limit: t.limit } : {}), ...(t.budgetKW !== null ? { budgetKW: t.budgetKW } : {}) };
}
