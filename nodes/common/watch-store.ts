/**
 * Where watch mode keeps its tokens and each token's last reported state, so
 * that a redeploy or a restart neither forgets a token added by message nor
 * reports an unchanged session as `started` again.
 *
 * Flow context (node context is deleted each time a node closes), in the
 * context store the node names (`contextStore`, empty = the default store),
 * under one key per node holding one entry per token:
 *
 *     "charging-watch-<node id>": { "t:<token, URI-encoded>": { msg?: true, state?: SavedState } }
 *
 * Every change is one nested set (`…["t:RFID-1"].state`): O(1) in the memory
 * store and in localfilesystem's cache, which writes the file at most once per
 * flushInterval (30 s). Never the whole object per change.
 *
 * States are batched: a poll's change waits (in `pending`, the latest per
 * token) until the next flushDue() at least STATE_BATCH_MS after the last
 * write, and all of them go in one set. The watcher's tick calls flushDue(), so
 * a change is in the store within about a second; closing the node flushes.
 * At 100 tokens that is one context write a second instead of ten: each
 * write walks the key and marks the store dirty, a cost paid per poll otherwise.
 */
import type { Node } from 'node-red';
import type { SavedState } from '../lib/session/watcher';
import { monotonicNow } from '../lib/clock';
import { flowContextOf, type FlowContext } from './flow-context';

export const watchedKey = (node: Pick<Node, 'id'>): string => `charging-watch-${node.id}`;

/** A token as kept: added by message (watched again after a redeploy), and its state. */
export interface KeptToken {
  msg?: true;
  state?: SavedState;
}


/** The key prefix keeps tokens such as "__proto__" from meaning anything to an object. */
const PREFIX = 't:';

/** States are written at most once per this many ms (plus one watcher tick). */
export const STATE_BATCH_MS = 1000;

export class WatchStore {
  private readonly flow: FlowContext;
  private readonly base: string;
  private readonly store: string | undefined;
  /** each watched token's state key, built once rather than on every poll that changes it: string building per poll adds up at thousands of tokens */
  private readonly stateKeys = new Map<string, string>();
  /** states not written yet, by token: the latest of each */
  private readonly pending = new Map<string, SavedState | undefined>();
  /** each token's last reported state (the watcher's own object, updated in place): what a seed must be, not what was loaded */
  private readonly latest = new Map<string, SavedState | undefined>();
  private lastFlush = -Infinity;
  /** after close(): an asynchronous store's late answer resumes nothing, and nothing more is written */
  private closed = false;

  constructor(
    node: Node,
    store: string | undefined,
    private readonly onError: (err: Error) => void,
    private readonly now: () => number = monotonicNow,
  ) {
    this.flow = flowContextOf(node);
    // Quoted, so that a node id with a dot or bracket stays one key.
    this.base = `"${watchedKey(node)}"`;
    this.store = store || undefined;
  }

  /** The kept tokens (called back at once for the memory store and a cached file store). */
  load(done: (kept: Map<string, KeptToken>) => void): void {
    this.flow.get(this.base, this.store, (err, value) => {
      // A store that answers after the node closed (a redeploy during a slow read): the node is gone, and its key may be cleared.
      if (this.closed) return;
      if (err) this.onError(err);
      const kept = new Map<string, KeptToken>();
      if (Array.isArray(value)) {
        // The list of tokens kept by earlier versions: added by message, no state. Rewritten once in the new form.
        for (const t of value) if (typeof t === 'string') kept.set(t, { msg: true });
        this.write([this.base], [Object.fromEntries([...kept.keys()].map((t) => [PREFIX + encodeURIComponent(t), { msg: true }]))]);
      } else if (value && typeof value === 'object') {
        for (const [key, v] of Object.entries(value as Record<string, KeptToken>)) {
          const token = key.startsWith(PREFIX) ? decode(key.slice(PREFIX.length)) : null;
          if (token !== null && v && typeof v === 'object') kept.set(token, v);
        }
      }
      for (const [token, k] of kept) this.latest.set(token, k.state);
      done(kept);
    });
  }

  /** Tokens added by message: watched again after a redeploy even if not set in the node. */
  added(tokens: string[]): void {
    if (tokens.length > 0) this.write(tokens.map((t) => `${this.key(t)}.msg`), tokens.map(() => true));
  }

  removed(tokens: string[]): void {
    for (const t of tokens) {
      this.stateKeys.delete(t);
      this.pending.delete(t);
      this.latest.delete(t);
    }
    if (tokens.length > 0) this.write(
        tokens.map((t) => this.key(t)),
        tokens.map(() => undefined),
      );
  }

  /** A token's state after a poll changed it; undefined when its session ended. Written by the next flushDue(). */
  state(token: string, state: SavedState | undefined): void {
    this.pending.set(token, state);
    this.latest.set(token, state);
  }

  /** The token's last reported state, or the one loaded if none was reported since (undefined: none). */
  lastState(token: string): SavedState | undefined {
    return this.latest.get(token);
  }

  /** Writes the pending states if STATE_BATCH_MS has passed since the last write. */
  flushDue(): void {
    if (this.pending.size === 0) return;
    const now = this.now();
    if (now - this.lastFlush < STATE_BATCH_MS) return;
    this.lastFlush = now;
    this.flush();
  }

  /** Writes the pending states now (the node closes). */
  flush(): void {
    if (this.pending.size === 0) return;
    const keys: string[] = [];
    const values: unknown[] = [];
    for (const [token, state] of this.pending) {
      let key = this.stateKeys.get(token);
      if (key === undefined) this.stateKeys.set(token, (key = `${this.key(token)}.state`));
      keys.push(key);
      values.push(state);
    }
    this.pending.clear();
    this.write(keys, values);
  }

  /** Every token unwatched; `removed` node: the key itself goes. */
  clear(removed = false): void {
    this.stateKeys.clear();
    this.pending.clear();
    this.latest.clear();
    this.write([this.base], [removed ? undefined : {}]);
  }

  /** The node closed: after the last flush or clear, nothing is loaded or written any more. */
  close(): void {
    this.closed = true;
    this.pending.clear();
    this.latest.clear();
  }

  private key(token: string): string {
    return `${this.base}["${PREFIX}${encodeURIComponent(token)}"]`;
  }

  /**
   * Always keys and values as arrays: Node-RED then skips looking for a
   * "#:(store)::" prefix and a "$parent." in the key (neither can start ours),
   * on every poll that changes a state.
   */
  private write(keys: string[], values: unknown[]): void {
    if (this.closed) return;
    try {
      this.flow.set(keys, values, this.store, (err) => {
        if (err) this.onError(err);
      });
    } catch (err) {
      this.onError(err as Error);
    }
  }
}

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}
