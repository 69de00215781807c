/** The editor's TypedInput fields (str/msg/flow/global/env/jsonata), evaluated per message. */
import type { Node, NodeAPI, NodeMessageInFlow } from 'node-red';
import { ChargingError } from '../lib/errors';
import type { CommandField, NodeFields } from '../lib/session/inputs';

/** Typed-input settings of one field, as the editor saves them. */
export interface TypedField {
  value: string;
  type: string;
}

/** Reads a typed field from the saved node config, tolerating old or hand-written flows. */
export function typedField(config: object, name: string): TypedField {
  const c = config as Record<string, unknown>;
  const value = c[name];
  const type = c[`${name}Type`];
  return { value: typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value), type: typeof type === 'string' && type ? type : 'str' };
}

/** The typed fields of a node's config, by name. */
export function typedFields<F extends CommandField>(config: object, names: readonly F[]): Record<F, TypedField> {
  const out = {} as Record<F, TypedField>;
  for (const n of names) out[n] = typedField(config, n);
  return out;
}

/**
 * Per message: the node's own field values, evaluated only when some field is
 * not a literal (the common literal case costs no promise).
 */
export function fieldReader(RED: NodeAPI, node: Node, fields: Partial<Record<CommandField, TypedField>>): (msg: NodeMessageInFlow) => NodeFields | Promise<NodeFields> {
  const literal = literalFields(fields);
  return literal ? () => literal : (msg) => evaluateFields(RED, node, fields, msg);
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
 * The fields' values when every one is a literal string (or empty, for "from
 * msg.payload"): known once, at deploy, with nothing to evaluate per message.
 * Null when some field needs evaluating (msg, flow, global, env, jsonata).
 */
export function literalFields(fields: Partial<Record<CommandField, TypedField>>): NodeFields | null {
  const out: NodeFields = {};
  for (const [name, field] of Object.entries(fields) as Array<[CommandField, TypedField | undefined]>) {
    if (!field) continue;
    if ((field.type || 'str') !== 'str') return null;
    if ((field.value ?? '').trim() !== '') out[name] = field.value;
  }
  return out;
}

/**
 * The node's own settings for the given fields. A field of type "str" left empty
 * is "unset": it will be read from msg.payload (DESIGN §2 "Inputs").
 */
export async function evaluateFields(RED: NodeAPI, node: Node, fields: Partial<Record<CommandField, TypedField>>, msg: NodeMessageInFlow): Promise<NodeFields> {
  const out: NodeFields = {};
  for (const [name, field] of Object.entries(fields) as Array<[CommandField, TypedField | undefined]>) {
    if (!field) continue;
    const type = field.type || 'str';
    if (type === 'str') {
      // The common case needs no evaluation (and no promise): a literal, or empty for "from msg.payload".
      if ((field.value ?? '').trim() !== '') out[name] = field.value;
      continue;
    }
    try {
      out[name] = await evaluate(RED, node, { value: field.value ?? '', type }, msg);
    } catch (err) {
      throw new ChargingError('INVALID_INPUT', `${name}: could not evaluate the ${type} setting "${field.value}" (${(err as Error).message})`, { field: name });
    }
    if (out[name] === undefined) {
      throw new ChargingError('MISSING_FIELD', `${name} is set to ${type} "${field.value}", which is not defined`, { field: name });
    }
  }
  return out;
}
