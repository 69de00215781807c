/**
 * What the three action nodes share on the Node-RED side: finding the config
 * node, evaluating typed inputs, and the input/close lifecycle with status and
 * error reporting. Everything that is not Node-RED lives in ../lib.
 */
import { setMaxListeners } from 'node:events';
import type { Node, NodeAPI, NodeMessageInFlow, NodeMessage } from 'node-red';
import { ChargingError, isChargingError } from '../lib/errors';
import type { ServiceClient } from '../lib/service-client';
import type { DeriveOptions, CommandField, NodeFields } from '../lib/session';
import { Status, NodeStatus } from '../lib/status';

/** The public face of a charging-service config node. */
export interface ChargingServiceNode extends Node {
  /** the shared client, or a CONFIG error saying what is wrong with the configuration */
  getClient(): ServiceClient;
  readonly deriveOptions: DeriveOptions;
}

/** Typed-input settings of one field, as the editor saves them. */
export interface TypedField {
  value: string;
  type: string;
}

export type Outputs = NodeMessage | Array<NodeMessage | NodeMessage[] | null> | null;

export interface WorkContext {
  client: ServiceClient;
  service: ChargingServiceNode;
  /** aborted when the node closes */
  signal: AbortSignal;
  setStatus(s: NodeStatus): void;
}

/** Longest a closing node waits for its requests on the wire before letting go. */
export const CLOSE_GRACE_MS = 5_000;

export function getService(RED: NodeAPI, serviceId: string | undefined): ChargingServiceNode {
  const service = serviceId ? (RED.nodes.getNode(serviceId) as ChargingServiceNode | null) : null;
  if (!service || typeof service.getClient !== 'function') {
    throw new ChargingError('CONFIG', 'No charging-service configuration is selected in this node');
  }
  return service;
}

function evaluate(RED: NodeAPI, node: Node, field: TypedField, msg: NodeMessageInFlow): Promise<unknown> {
  return new Promise((resolve, reject) => {
    RED.util.evaluateNodeProperty(field.value, field.type, node, msg, (err: Error | null, value: unknown) => {
      if (err) reject(err);
      else resolve(value);
    });
  });
}

/**
 * The node's own settings for the given fields. A field of type "str" left empty
 * is "unset": it will be read from msg.payload (DESIGN §2 "Inputs").
 */
export async function evaluateFields(
  RED: NodeAPI,
  node: Node,
  fields: Partial<Record<CommandField, TypedField>>,
  msg: NodeMessageInFlow,
): Promise<NodeFields> {
  const out: NodeFields = {};
  for (const [name, field] of Object.entries(fields) as Array<[CommandField, TypedField | undefined]>) {
    if (!field) continue;
    const type = field.type || 'str';
    if (type === 'str' && (field.value ?? '').trim() === '') continue;
    try {
      out[name] = await evaluate(RED, node, { value: field.value ?? '', type }, msg);
    } catch (err) {
      throw new ChargingError('INVALID_INPUT', `${name}: could not evaluate the ${type} setting "${field.value}" (${(err as Error).message})`, {
        field: name,
      });
    }
    if (out[name] === undefined) {
      throw new ChargingError('MISSING_FIELD', `${name} is set to ${type} "${field.value}", which is not defined`, { field: name });
    }
  }
  return out;
}

/** Reads a typed field from the saved node config, tolerating old or hand-written flows. */
export function typedField(config: Record<string, unknown>, name: string): TypedField {
  const value = config[name];
  const type = config[`${name}Type`];
  return { value: typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value), type: typeof type === 'string' && type ? type : 'str' };
}

/**
 * Wires a node's input and close handlers around one async work function.
 * - status shows requesting / result / error, and is cleared on close;
 * - errors go to done(err) so Catch nodes see them, nothing is sent;
 * - on close, waiting work is aborted, requests on the wire get a short grace,
 *   and nothing is sent afterwards.
 */
export function runNode(
  RED: NodeAPI,
  node: Node,
  serviceId: string | undefined,
  work: (msg: NodeMessageInFlow, ctx: WorkContext) => Promise<Outputs>,
): void {
  const controller = new AbortController();
  // Every queued or retrying request of this node listens on one signal; hundreds at once are normal.
  setMaxListeners(0, controller.signal);
  const inFlight = new Set<Promise<void>>();
  let closed = false;
  const setStatus = (s: NodeStatus) => {
    if (!closed) node.status(s);
  };

  node.on('input', (msg, send, done) => {
    const job = (async () => {
      try {
        const service = getService(RED, serviceId);
        const client = service.getClient();
        const out = await work(msg, { client, service, signal: controller.signal, setStatus });
        if (closed) return done();
        if (out !== null) send(out);
        done();
      } catch (err) {
        if (closed && isChargingError(err) && err.code === 'CLOSED') return done();
        const error = isChargingError(err)
          ? err
          : new ChargingError('INTERNAL', `Unexpected failure in the charging nodes (please report it): ${(err as Error)?.message ?? String(err)}`);
        setStatus(Status.error(error));
        done(error);
      }
    })();
    inFlight.add(job);
    void job.finally(() => inFlight.delete(job));
  });

  node.on('close', (_removed: boolean, done: () => void) => {
    closed = true;
    controller.abort();
    node.status({});
    const grace = new Promise<void>((resolve) => {
      const t = setTimeout(resolve, CLOSE_GRACE_MS);
      t.unref?.();
      void Promise.allSettled([...inFlight]).then(() => {
        clearTimeout(t);
        resolve();
      });
    });
    void grace.then(() => done());
  });
}
