import type { Node, NodeAPI, NodeDef } from 'node-red';
import { acceptedMessage, operationMs, sendWhenConfirmed, WaitConfig } from './common/confirm';
import { sendOnce } from './common/send-once';
import { NodeLifecycle } from './common/node-lifecycle';
import { formatEnergy, Status } from './common/status';
import { fieldReader, typedFields } from './common/typed-fields';
import { startCommand } from './lib/session/commands';
import { resolveFields } from './lib/session/inputs';
import { deriveSession } from './lib/session/record';
import { started } from './lib/session/wait';

interface StartConfig extends NodeDef, WaitConfig {
  service: string;
}

const FIELDS = ['locationId', 'evseId', 'token'] as const;

export = function register(RED: NodeAPI): void {
  function ChargingStart(this: Node, config: StartConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const readFields = fieldReader(RED, node, typedFields(config, FIELDS));
    new NodeLifecycle(RED, node).onInput(config.service, async (msg, ctx) => {
      const command = startCommand(resolveFields(FIELDS, await readFields(msg), msg.payload));
      return sendOnce(ctx, msg, command, operationMs(config), async () => {
        ctx.status(Status.requesting('starting'));
        const res = await ctx.client.sendCommand(command, { signal: ctx.signal });
        const out = acceptedMessage(msg, { ...command }, res, 'START', ctx);
        if (!config.wait) {
          ctx.status(res.statusCode === 202 ? Status.ok('startAccepted') : Status.ok('startAcceptedStatus', { status: res.statusCode }));
          return out;
        }
        return sendWhenConfirmed(out, command.token, started, 'START', config, ctx, (record) => {
          const session = deriveSession(record ?? {}, ctx.service.deriveOptions);
          out.session = session;
          out.outcome = 'started';
          return Status.ok('started', { transactionId: session.transactionId ?? '', energy: formatEnergy(session.energyKWh) });
        });
      });
    });
  }
  RED.nodes.registerType('charging-start', ChargingStart);
};
