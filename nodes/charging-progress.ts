import type { NodeAPI, Node, NodeDef } from 'node-red';
import { evaluateFields, runNode, typedField } from './common/node-support';
import { deriveSession, resolveFields } from './lib/session';
import { Status, formatKWh } from './lib/status';

interface ProgressConfig extends NodeDef {
  service: string;
}

export = function register(RED: NodeAPI): void {
  function ChargingProgress(this: Node, config: ProgressConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = { token: typedField(raw, 'token') };
    let lastWarning = '';

    runNode(RED, node, config.service, async (msg, ctx) => {
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
        return out;
      }
      const session = deriveSession(res.record, ctx.service.deriveOptions);
      const warning = session.warnings.join('; ');
      if (warning && warning !== lastWarning) node.warn(warning);
      lastWarning = warning;
      ctx.setStatus(session.pending ? Status.waiting('pending: not started yet') : Status.ok(`charging ${formatKWh(session.energyKWh)}`.trim()));
      out.payload = res.record; // as the service returned it (DESIGN §2)
      out.session = session;
      return out;
    });
  }
  RED.nodes.registerType('charging-progress', ChargingProgress);
};
