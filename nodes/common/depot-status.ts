/**
 * charging-depot-status's Node-RED side: the depot's table on the output
 * (asked for, or on a change, at most once a second), its badge
 * ("3/4 in use · 5 waiting"), and msg.limit / msg.budgetKW set at run time.
 */
import type { Node, NodeAPI, NodeMessage, NodeMessageInFlow } from 'node-red';
import type { GrantList, GrantPool } from '../lib/coordination/grants';
import { depotStatus, type DepotStatus } from '../lib/depot/status';
import { runTimeLimits } from '../lib/depot/settings';
import { ChargingError } from '../lib/errors';
import { getDepot, type ChargingDepotNode } from './depot-node';
import type { NodeLifecycle } from './node-lifecycle';
import { monotonicNow } from '../lib/clock';
import { Status, type NodeStatus } from './status';

/** At most one output a second for changes (a request is answered at once). */
export const STATUS_GAP_MS = 1000;

export function depotBadge(s: DepotStatus): NodeStatus {
  const parts: string[] = [s.limit !== null ? `${s.inUse}/${s.limit}` : String(s.inUse)];
  const kw = s.budgetKW !== null ? ` · ${s.usedKW}/${s.budgetKW} kW` : '';
  return { fill: s.waiting > 0 ? 'yellow' : s.inUse > 0 ? 'green' : 'grey', shape: 'dot', key: 'depot.badge', values: { inUse: parts[0], kw, waiting: s.waiting } };
}

export class DepotStatusMode {
  private timer: NodeJS.Timeout | null = null;
  private lastOut = -Infinity;
  private off: (() => void) | null = null;

  private constructor(
    private readonly depot: ChargingDepotNode | null,
    private readonly life: NodeLifecycle,
  ) {}

  static start(RED: NodeAPI, node: Node, config: { depot?: string }, life: NodeLifecycle): DepotStatusMode {
    let depot: ChargingDepotNode | null = null;
    try {
      depot = getDepot(RED, config.depot);
      if (!depot) throw new ChargingError('CONFIG', 'No charging-depot is selected in this node', { field: 'depot' });
    } catch (err) {
      life.board.set(Status.error(err));
    }
    const mode = new DepotStatusMode(depot, life);
    mode.watch();
    life.onClose(() => mode.close());
    return mode;
  }

  /** A message: a new limit (msg.limit, msg.budgetKW) or a request for the table; answered with the table. */
  async input(msg: NodeMessageInFlow): Promise<NodeMessage> {
    const pool = this.pool();
    const m = msg as { limit?: unknown; budgetKW?: unknown };
    let list: GrantList;
    if (m.limit !== undefined || m.budgetKW !== undefined) {
      const now = await pool.list();
      if (!now.ok) throw new ChargingError('CONFIG', `The depot cannot be asked: ${now.reason}`);
      const limits = runTimeLimits(m, now.table, this.settings().assumedKW);
      list = limits ? await pool.setLimit(limits) : now;
    } else {
      list = await pool.list();
    }
    if (!list.ok) throw new ChargingError('CONFIG', `The depot cannot be asked: ${list.reason}`);
    const status = depotStatus(list);
    this.life.board.set(depotBadge(status));
    this.lastOut = monotonicNow();
    return { ...msg, topic: typeof msg.topic === 'string' ? msg.topic : 'status', payload: status };
  }

  private pool(): GrantPool {
    if (!this.depot) throw new ChargingError('CONFIG', 'No charging-depot is selected in this node', { field: 'depot' });
    return this.depot.pool();
  }

  private settings() {
    const d = this.depot?.depot;
    if (!d || 'error' in d) throw d && 'error' in d ? d.error : new ChargingError('CONFIG', 'No charging-depot is selected in this node');
    return d.settings;
  }

  /** Every change of the table: the badge, and the table on the output at most once a second. */
  private watch(): void {
    let pool: GrantPool;
    try {
      pool = this.pool();
    } catch (err) {
      this.life.board.set(Status.error(err));
      return;
    }
    this.off = pool.onChange(() => this.changed(pool));
    // The badge at deploy; the output only on a change or a request.
    void pool.list().then((list) => list.ok && !this.life.isClosed && this.life.board.set(depotBadge(depotStatus(list))));
  }

  private changed(pool: GrantPool): void {
    if (this.timer) return;
    const wait = Math.max(0, this.lastOut + STATUS_GAP_MS - monotonicNow());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.lastOut = monotonicNow();
      void pool.list().then((list) => {
        if (!list.ok || this.life.isClosed) return;
        const status = depotStatus(list);
        this.life.board.set(depotBadge(status));
        this.life.emit({ topic: 'status', payload: status });
      });
    }, wait);
    this.timer.unref?.();
  }

  private close(): void {
    this.off?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
