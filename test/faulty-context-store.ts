/**
 * A context store for in-process tests (settings: contextStorage: { books: {
 * module: faultyContextStore } }): Node-RED's own memory store whose data
 * outlives a flow's unload, as a disk's would (a redeploy or a restart keeps
 * the books), with faults on demand: writes to some paths refused, or a
 * write that lands at once but answers late (the node may close between the
 * two, as across a kill after a write).
 */
type Callback = (err?: Error | null, ...values: unknown[]) => void;

interface MemoryStore {
  data: Record<string, unknown>;
  open(): Promise<void>;
  close(): Promise<void>;
  get(scope: string, key: string | string[], cb?: Callback): unknown;
  set(scope: string, key: string | string[], value: unknown, cb?: Callback): void;
  keys(scope: string, cb?: Callback): unknown;
  delete(scope: string): Promise<void>;
  clean(activeNodes: string[]): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const memory = require('@node-red/runtime/lib/nodes/context/memory') as (config: unknown) => MemoryStore;

export const storeFaults = {
  /** writes whose key contains this text fail ("the disk is full"); null: none */
  refuse: null as string | null,
  /** writes whose key contains this text answer this many ms after they landed */
  slowPath: null as string | null,
  slowMs: 0,
  /** every scope's data: kept across unloads, dropped by reset() */
  data: {} as Record<string, unknown>,
  reset(): void {
    this.refuse = null;
    this.slowPath = null;
    this.slowMs = 0;
    for (const k of Object.keys(this.data)) delete this.data[k];
  },
};

const touches = (key: string | string[], part: string | null): boolean => part !== null && (Array.isArray(key) ? key : [key]).some((k) => k.includes(part));

export function faultyContextStore(config: unknown): MemoryStore {
  const store = memory(config);
  store.data = storeFaults.data;
  const set = store.set.bind(store);
  store.set = (scope, key, value, cb) => {
    if (touches(key, storeFaults.refuse)) return cb?.(new Error('the disk is full'));
    if (!touches(key, storeFaults.slowPath)) return set(scope, key, value, cb);
    set(scope, key, value, (err) => setTimeout(() => cb?.(err), storeFaults.slowMs));
  };
  // What a disk keeps: nothing is cleaned away when the flows stop.
  store.delete = () => Promise.resolve();
  store.clean = () => Promise.resolve();
  return store;
}
