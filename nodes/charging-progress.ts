import type { Node, NodeAPI, NodeDef, NodeMessage } from 'node-red';
import { NodeLifecycle, Outputs } from './common/node-lifecycle';
import { formatEnergy, Status } from './common/status';
import { fieldReader, typedFields } from './common/typed-fields';
import { WatchConfig, WatchMode } from './common/watch-mode';
import { resolveFields } from './lib/session/inputs';
import { deriveSession } from './lib/session/record';

interface ProgressConfig extends NodeDef, WatchConfig {
  mode?: 'query' | 'watch';
  splitOutputs?: boolean;
}

/** With separate outputs: pending/started on 1, updated/poll on 2, ended on 3. */
const OUTPUT_OF_EVENT: Record<string, number> = { pending: 0, started: 0, updated: 1, poll: 1, ended: 2 };

export = function register(RED: NodeAPI): void {
  function ChargingProgress(this: Node, config: ProgressConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const readFields = fieldReader(RED, node, typedFields(config, ['token'] as const));
    const split = config.mode === 'watch' && config.splitOutputs === true;
    const toOutputs = (msg: NodeMessage, event = 'started'): Outputs => {
      if (!split) return msg;
      const outs: Array<NodeMessage | null> = [null, null, null];
      outs[OUTPUT_OF_EVENT[event] ?? 0] = msg;
      return outs;
    };
    const life = new NodeLifecycle(RED, node);
    const watch = config.mode === 'watch' ? WatchMode.start(RED, node, config, life, toOutputs) : null;

    life.onInput(config.service, async (msg, ctx) => {
      if (watch && (msg.topic === 'watch' || msg.topic === 'unwatch')) {
        watch.command(msg.topic, msg.payload);
        return null;
      }
      const { token } = resolveFields(['token'] as const, await readFields(msg), msg.payload);
      ctx.status(Status.requesting('querying'));
      const res = await ctx.client.getProgress(token, { signal: ctx.signal });
      if (res.record === null) {
        // DESIGN §2 "No active session": not an error.
        ctx.status(Status.idle('noSession'));
        return toOutputs({ ...msg, payload: null, session: null, statusCode: res.statusCode } as NodeMessage);
      }
      const session = deriveSession(res.record, ctx.service.deriveOptions);
      if (session.warnings.length > 0) ctx.warnOnce('record', session.warnings.join('; '));
      ctx.status(session.pending ? Status.waiting('pending') : Status.ok('charging', { energy: formatEnergy(session.energyKWh) }));
      // msg.payload is the record as the service returned it (DESIGN §2); derived values go to msg.session.
      return toOutputs({ ...msg, payload: res.record, session, statusCode: res.statusCode } as NodeMessage);
    });
  }
  RED.nodes.registerType('charging-progress', ChargingProgress);
};
