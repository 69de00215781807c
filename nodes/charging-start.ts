import type { NodeAPI, Node, NodeDef } from 'node-red';
import { evaluateFields, runNode, typedField } from './common/node-support';
import { WaitConfig, waitFor, hasTransaction } from './common/waits';
import { deriveSession, resolveFields, startCommand } from './lib/session';
import { Status, formatKWh } from './lib/status';
import { isChargingError } from './lib/errors';

interface StartConfig extends NodeDef, WaitConfig {
  service: string;
}

export = function register(RED: NodeAPI): void {
  function ChargingStart(this: Node, config: StartConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = { locationId: typedField(raw, 'locationId'), evseId: typedField(raw, 'evseId'), token: typedField(raw, 'token') };
    const twoOutputs = config.wait === true && config.timeoutOutput === true;

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
      ctx.setStatus(Status.waiting(`accepted, waiting for start…`));
      try {
        const record = await waitFor(ctx.client, command.token, hasTransaction, 'START', config, ctx.signal);
        const session = deriveSession(record ?? {}, ctx.service.deriveOptions);
        out.session = session;
        out.outcome = 'started';
        ctx.setStatus(Status.ok(`started ${session.transactionId ?? ''} ${formatKWh(session.energyKWh)}`.trim()));
        return twoOutputs ? [out, null] : out;
      } catch (err) {
        if (!twoOutputs || !isChargingError(err) || err.code !== 'NOT_CONFIRMED') throw err;
        out.outcome = 'not confirmed';
        ctx.setStatus(Status.warn('start not confirmed'));
        return [null, out];
      }
    });
  }
  RED.nodes.registerType('charging-start', ChargingStart);
};
