import type { Node, NodeAPI, NodeDef } from 'node-red';
import { ControlConfig, ControlMode } from './common/control-mode';
import { NodeLifecycle } from './common/node-lifecycle';
import { fieldReader, typedFields } from './common/typed-fields';
import { parseEnergyLimit, parseWanted } from './lib/control/wish';
import { parsePriority } from './lib/depot/settings';
import { resolveFields } from './lib/session/inputs';

interface ChargingControlConfig extends NodeDef, ControlConfig {}

const FIELDS = ['locationId', 'evseId', 'token'] as const;

/**
 * Keeps a connector in the state the flow wants: msg.payload on/off in, a
 * message out on every change of state. The target is set in the node, or read
 * from msg.target (msg.payload is the wish); state is kept per target.
 */
export = function register(RED: NodeAPI): void {
  function ChargingControl(this: Node, config: ChargingControlConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const readFields = fieldReader(RED, node, typedFields(config, FIELDS));
    const life = new NodeLifecycle(RED, node);
    const control = ControlMode.start(RED, node, config, life);
    life.onInput(config.service, async (msg) => {
      const wanted = parseWanted(msg.payload);
      const target = resolveFields(FIELDS, await readFields(msg), (msg as { target?: unknown }).target, 'msg.target');
      const m = msg as { force?: unknown; restart?: unknown; energyLimit?: unknown; priority?: unknown };
      const energyLimit = parseEnergyLimit(m.energyLimit);
      const priority = parsePriority(m.priority);
      await control.want(target, wanted, { force: m.force === true, restart: m.restart === true, ...(energyLimit !== undefined ? { energyLimit } : {}), ...(priority !== undefined ? { priority } : {}) });
      return null;
    });
  }
  RED.nodes.registerType('charging-control', ChargingControl);
};
