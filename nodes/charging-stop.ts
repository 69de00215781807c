import type { Node, NodeAPI, NodeDef } from 'node-red';
import { acceptedMessage, EnsureConfig, operationMs, sendWhenConfirmed, sendWhenStopped } from './common/confirm';
import { sendOnce } from './common/send-once';
import { NodeLifecycle } from './common/node-lifecycle';
import { Status } from './common/status';
import { fieldReader, typedFields } from './common/typed-fields';
import { resolveStop } from './lib/session/stop';
import { ended } from './lib/session/wait';

interface StopConfig extends NodeDef, EnsureConfig {
  service: string;
}

const FIELDS = ['locationId', 'evseId', 'token', 'transactionId'] as const;

export = function register(RED: NodeAPI): void {
  function ChargingStop(this: Node, config: StopConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const readFields = fieldReader(RED, node, typedFields(config, FIELDS));
    new NodeLifecycle(RED, node).onInput(config.service, async (msg, ctx) => {
      const lookup = async (token: string) => (await ctx.client.getProgress(token, { signal: ctx.signal })).record;
      const { command, cdrId } = await resolveStop(await readFields(msg), msg.payload, lookup, () => ctx.status(Status.requesting('lookingUp')));
      // The billing id rides along when the input was a record or the session was looked up: billing needs it after STOP.
      const payload = cdrId ? { ...command, cdrId } : { ...command };
      return sendOnce(ctx, msg, command, operationMs(config), async () => {
        if (config.ensure) return sendWhenStopped(msg, payload, command, config, ctx);
        ctx.status(Status.requesting('stopping'));
        const res = await ctx.client.sendCommand(command, { signal: ctx.signal });
        const out = acceptedMessage(msg, payload, res, 'STOP', ctx);
        if (!config.wait) {
          ctx.status(res.statusCode === 202 ? Status.ok('stopAccepted') : Status.ok('stopAcceptedStatus', { status: res.statusCode }));
          return out;
        }
        return sendWhenConfirmed(out, command.token, ended(command.transactionId as string), 'STOP', config, ctx, () => {
          out.outcome = 'ended';
          return Status.ok('sessionEnded');
        });
      });
    });
  }
  RED.nodes.registerType('charging-stop', ChargingStop);
};
