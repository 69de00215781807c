import type { Node, NodeAPI, NodeDef } from 'node-red';
import { setUpDepot } from './common/depot-node';
import type { DepotConfig } from './lib/depot/settings';

interface ChargingDepotConfig extends NodeDef, DepotConfig {}

/**
 * A site limit shared by the charging-control nodes that name it (one per
 * grid connection or fuse): at most `limit` connectors, or `budgetKW`,
 * charging at once, a queue with priority and aging, turns, full cars let
 * go, shedding. Its grants live with its control nodes' charging-service.
 */
export = function register(RED: NodeAPI): void {
  function ChargingDepot(this: Node, config: ChargingDepotConfig): void {
    RED.nodes.createNode(this, config);
    setUpDepot(RED, this, config);
  }
  RED.nodes.registerType('charging-depot', ChargingDepot);
};
