import type { NodeAPI, Node, NodeDef } from 'node-red';
import { evaluateFields, runNode, typedField } from './common/node-support';
import { WaitConfig, hasTransaction, sendWhenConfirmed } from './common/waits';
import { deriveSession, resolveFields, startCommand } from './lib/session';
import { Status, formatKWh } from './lib/status';

interface StartConfig extends NodeDef, WaitConfig {
  service: string;
}

export = function register(RED: NodeAPI): void {
  function ChargingStart(this: Node, config: StartConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = { locationId: typedField(raw, 'locationId'), evseId: typedField(raw, 'evseId'), token: typedField(raw, 'token') };

    runNode(RED, node, config.service, async (msg, ctx) => {
      const set = await evaluateFields(RED, node, fields, msg);
      const f = resolveFields(['locationId', 'evseId', 'token'] as const, set, msg.payload);
      const command = startCommand(f);
      ctx.setStatus(Status.requesting('starting'));
      const res = await ctx.client.startSession(command, { signal: ctx.signal });
      // DESIGN §2 "Chaining": the output still carries what progress and stop need.
      const out = msg as typeof msg & { statusCode?: number; response?: unknown; session?: unknown; outcome?: string };
      out.payload = { ...command };
      out.statusCode = res.statusCode;
      out.response = res.body;
      if (!config.wait) {
        ctx.setStatus(Status.ok(`start accepted`));
        return out;
      }
      return sendWhenConfirmed(out, command.token, hasTransaction, 'START', config, ctx, (record) => {
        const session = deriveSession(record ?? {}, ctx.service.deriveOptions);
        out.session = session;
        out.outcome = 'started';
        return Status.ok(`started ${session.transactionId ?? ''} ${formatKWh(session.energyKWh)}`.trim());
      });
    });
  }
  RED.nodes.registerType('charging-start', ChargingStart);
};
