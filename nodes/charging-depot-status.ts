import type { Node, NodeAPI, NodeDef } from 'node-red';
import { DepotStatusMode } from './common/depot-status';
import { NodeLifecycle } from './common/node-lifecycle';

interface DepotStatusConfig extends NodeDef {
  depot?: string;
}

/**
 * A depot's table and badge ("3/4 in use · 5 waiting"): msg.topic "status"
 * (or any message without a limit) outputs it, and so does any change, at
 * most once a second; msg.limit / msg.budgetKW change the limit at run time.
 */
export = function register(RED: NodeAPI): void {
  function ChargingDepotStatus(this: Node, config: DepotStatusConfig): void {
    RED.nodes.createNode(this, config);
    const life = new NodeLifecycle(RED, this);
    const status = DepotStatusMode.start(RED, this, config, life);
    life.onMessage((msg) => status.input(msg));
  }
  RED.nodes.registerType('charging-depot-status', ChargingDepotStatus);
};
