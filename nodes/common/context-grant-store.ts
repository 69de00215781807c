/**
 * A depot's grants kept in Node-RED context while the process is alone
 * (GrantStore of nodes/lib/coordination/grants.ts): global context of the
 * store its control nodes keep their state in, one key per depot:
 *
 *     "charging-depot-<depot id>": { "limits": KeptLimits, "e:<target key, URI-encoded>": KeptGrant }
 *
 * Each change is one nested set; the set's callback says the store has it
 * (a grant is answered only then: no record, no START).
 */
import type { Node } from 'node-red';
import type { GrantStore, KeptGrant, KeptLimits } from '../lib/coordination/grants';
import type { FlowContext } from './flow-context';

const PREFIX = 'e:';

export class ContextGrantStore implements GrantStore {
  private readonly global: FlowContext;
  private readonly base: string;

  constructor(node: Node, private readonly store: string | undefined) {
    this.global = node.context().global as unknown as FlowContext;
    this.base = `"charging-depot-${node.id}"`;
  }

  load(): Promise<{ entries: unknown[]; limits: unknown } | null> {
    return new Promise((resolve, reject) => {
      try {
        this.global.get(this.base, this.store, (err, value) => {
          if (err) return reject(err);
          if (!value || typeof value !== 'object' || Array.isArray(value)) return resolve(null);
          const all = value as Record<string, unknown>;
          resolve({ entries: Object.entries(all).filter(([k]) => k.startsWith(PREFIX)).map(([, v]) => v), limits: all.limits });
        });
      } catch (err) {
        reject(err);
      }
    });
  }

  save(key: string, entry: KeptGrant | undefined): Promise<void> {
    return this.write(`${this.base}["${PREFIX}${encodeURIComponent(key)}"]`, entry);
  }

  saveLimits(limits: KeptLimits): Promise<void> {
    return this.write(`${this.base}.limits`, limits);
  }

  private write(key: string, value: unknown): Promise<void> {
    return new Promise((resolve, reject) => {
      try {
        this.global.set([key], [value], this.store, (err) => (err ? reject(err) : resolve()));
      } catch (err) {
        reject(err);
      }
    });
  }
}
