/**
 * Flow context as the watch and control stores use it. Flow context, not node
 * context: node context is deleted each time a node closes, and what these
 * stores keep must outlive a redeploy.
 */
import type { Node } from 'node-red';

type Callback = (err?: Error | null, value?: unknown) => void;

/** Node-RED's flow context with the callback forms the stores use: keys and values as arrays. */
export interface FlowContext {
  get(key: string, store: string | undefined, cb: Callback): void;
  set(keys: string[], values: unknown[], store: string | undefined, cb: Callback): void;
}

/** The node's flow context, typed as the stores use it. */
export function flowContextOf(node: Node): FlowContext {
  return node.context().flow as unknown as FlowContext;
}
