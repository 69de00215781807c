import type { Node, NodeAPI, NodeDef } from 'node-red';
import { NodeLifecycle } from './common/node-lifecycle';
import { LedgerMode, type LedgerNodeConfig } from './common/ledger-mode';

type LedgerDef = NodeDef & LedgerNodeConfig;

export = function register(RED: NodeAPI): void {
  function ChargingLedger(this: Node, config: LedgerDef): void {
    RED.nodes.createNode(this, config);
    const life = new NodeLifecycle(RED, this);
    const ledger = LedgerMode.start(RED, this, config, life);
    this.on('input', (msg, send, done) => {
      // A configuration error (an unknown zone, a malformed table) refuses every message with it: nothing is booked wrong.
      if (ledger instanceof Error) return done(ledger);
      ledger.input(msg, send as (m: Array<unknown>) => void, done);
    });
  }
  RED.nodes.registerType('charging-ledger', ChargingLedger);
};
