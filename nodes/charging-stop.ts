import type { NodeAPI, Node, NodeDef } from 'node-red';
import { evaluateFields, runNode, typedField } from './common/node-support';
import { resolveFields, stopCommand } from './lib/session';
import { Status } from './lib/status';

interface StopConfig extends NodeDef {
  service: string;
}

export = function register(RED: NodeAPI): void {
  function ChargingStop(this: Node, config: StopConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = {
      locationId: typedField(raw, 'locationId'),
      evseId: typedField(raw, 'evseId'),
      token: typedField(raw, 'token'),
      transactionId: typedField(raw, 'transactionId'),
    };

    runNode(RED, node, config.service, async (msg, ctx) => {
      const set = await evaluateFields(RED, node, fields, msg);
      const f = resolveFields(['locationId', 'evseId', 'token', 'transactionId'] as const, set, msg.payload);
      const command = stopCommand(f);
      ctx.setStatus(Status.requesting('stopping'));
      const res = await ctx.client.stopSession(command, { signal: ctx.signal });
      ctx.setStatus(Status.ok(`stop accepted ${command.evseId}`));
      const out = msg as typeof msg & { statusCode?: number; response?: unknown };
      out.payload = { ...command, ...cdrIdOf(msg.payload) };
      out.statusCode = res.statusCode;
      out.response = res.body;
      return out;
    });
  }
  RED.nodes.registerType('charging-stop', ChargingStop);
};

/** Keep the billing id when the input was a progress record: billing needs it after STOP. */
function cdrIdOf(payload: unknown): { cdrId?: string } {
  if (!payload || typeof payload !== 'object') return {};
  const td = Object.prototype.hasOwnProperty.call(payload, 'transactionData') ? (payload as { transactionData?: unknown }).transactionData : undefined;
  if (!td || typeof td !== 'object' || !Object.prototype.hasOwnProperty.call(td, 'cdrId')) return {};
  const cdrId = (td as { cdrId?: unknown }).cdrId;
  return typeof cdrId === 'string' && cdrId !== '' ? { cdrId } : {};
}
