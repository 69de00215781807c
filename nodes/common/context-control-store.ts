/**
 * charging-control's ControlStore in Node-RED context: flow context (node
 * context is deleted each time a node closes), in the store the node names
 * (`contextStore`, empty = the default store), one key per node holding one
 * entry per target:
 *
 *     "charging-control-<node id>": { "t:<target key, URI-encoded>": KeptTarget }
 *
 * Each change is one nested set of that target's entry; the callback of the set
 * says the store has it (localfilesystem: in its cache, on disk at its next
 * flush, every 30 s by default; `flushInterval` shortens that).
 */
import type { Node } from 'node-red';
import { ChargingError } from '../lib/errors';
import type { KeptTarget } from '../lib/control/memory';
import type { ControlStore } from '../lib/control/store';
import { flowContextOf, type FlowContext } from './flow-context';

export const controlKey = (node: Pick<Node, 'id'>): string => `charging-control-${node.id}`;

/** The key prefix keeps a target key such as "__proto__" from meaning anything to an object. */
const PREFIX = 't:';

export class ContextControlStore implements ControlStore {
  private readonly flow: FlowContext;
  private readonly base: string;
  private readonly store: string | undefined;

  constructor(node: Node, store: string | undefined) {
    this.flow = flowContextOf(node);
    // Quoted, so that a node id with a dot or bracket stays one key.
    this.base = `"${controlKey(node)}"`;
    this.store = store || undefined;
  }

  load(): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      try {
        this.flow.get(this.base, this.store, (err, value) => {
          if (err) return reject(this.failure('read', err));
          resolve(value && typeof value === 'object' && !Array.isArray(value) ? Object.entries(value).filter(([k]) => k.startsWith(PREFIX)).map(([, v]) => v as unknown) : []);
        });
      } catch (err) {
        reject(this.failure('read', err));
      }
    });
  }

  save(key: string, kept: KeptTarget | undefined): Promise<void> {
    return this.write([`${this.base}["${PREFIX}${encodeURIComponent(key)}"]`], [kept]);
  }

  /** The node was deleted: its targets go with it. */
  clear(): Promise<void> {
    return this.write([this.base], [undefined]);
  }

  private write(keys: string[], values: unknown[]): Promise<void> {
    return new Promise((resolve, reject) => {
      try {
        this.flow.set(keys, values, this.store, (err) => (err ? reject(this.failure('keep', err)) : resolve()));
      } catch (err) {
        reject(this.failure('keep', err));
      }
    });
  }

  private failure(what: 'read' | 'keep', err: unknown): ChargingError {
    const where = this.store ? `context store "${this.store}"` : 'the default context store';
    return new ChargingError('CONFIG', `Could not ${what} the control state in ${where} (${(err as Error)?.message ?? String(err)}): nothing is sent until it can be kept; check contextStorage in settings.js`);
  }
}
