/**
 * Where charging-control keeps each target's memory across redeploys and
 * restarts. The node uses a Node-RED context store (nodes/common/context-control-store.ts);
 * a fleet of replicas can use a shared one (e.g. Redis) behind the same interface.
 */
import type { KeptTarget } from './memory';

export interface ControlStore {
  /** every target kept (raw: each is checked by fromKept, a damaged one is forgotten) */
  load(): Promise<unknown[]>;
  /**
   * Keeps a target's memory (undefined: forgets it). Resolves when the store
   * has it: a START or STOP is written before it is sent, and sent only then.
   */
  save(key: string, kept: KeptTarget | undefined): Promise<void>;
}

/** A store that keeps nothing beyond the process: for tests, and a stand-in while a real one loads. */
export class MemoryControlStore implements ControlStore {
  readonly kept = new Map<string, KeptTarget>();

  load(): Promise<unknown[]> {
    return Promise.resolve([...this.kept.values()].map((k) => JSON.parse(JSON.stringify(k)) as unknown));
  }

  save(key: string, kept: KeptTarget | undefined): Promise<void> {
    if (kept === undefined) this.kept.delete(key);
    else this.kept.set(key, JSON.parse(JSON.stringify(kept)) as KeptTarget);
    return Promise.resolve();
  }
}
