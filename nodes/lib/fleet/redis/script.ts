/**
 * A Lua script with named keys and arguments (docs/fleet.md, "Scripts"): the
 * Lua reads `K.<name>` and `A.<name>`, TypeScript passes them by name, so the
 * order of KEYS and ARGV is written once, here. A batch after the named ones
 * (lease keys, tokens) starts at KEYS[REST_KEYS] / ARGV[REST_ARGS]. Run by
 * its SHA1 (FleetConnection.eval), sent whole once when Redis has forgotten it.
 */
import { createHash } from 'node:crypto';
import { REDIS_CLOCK } from './clock';

export interface ScriptSpec<K extends string, A extends string> {
  name: string;
  /** KEYS by name, in order */
  keys: readonly K[];
  /** ARGV by name, in order */
  args: readonly A[];
  /** may read Redis's clock: defines `redisTime()` (clock.ts) */
  clock?: boolean;
  /**
   * a write the fleet must not lose to a failover (a claim, a commit, a list
   * change): on Sentinel it counts only once replicated or confirmed by the
   * sentinels (connection.ts)
   */
  durable?: boolean;
  lua: string;
}

/** One run of a script: what FleetConnection.eval sends. */
export interface ScriptCall {
  readonly script: Script<string, string>;
  readonly keys: string[];
  readonly args: Array<string | number>;
}

const NAME = /^[a-z][A-Za-z0-9]*$/;

export class Script<K extends string, A extends string> {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
  readonly durable: boolean;

  constructor(private readonly spec: ScriptSpec<K, A>) {
    this.durable = spec.durable === true;
    for (const n of [...spec.keys, ...spec.args]) if (!NAME.test(n)) throw new Error(`script ${spec.name}: ${n} is not a name Lua can read`);
    const bind = (table: string, from: string, names: readonly string[]) => `local ${table} = { ${names.map((n, i) => `${n} = ${from}[${i + 1}]`).join(', ')} }`;
    this.name = spec.name;
    this.lua = [
      bind('K', 'KEYS', spec.keys),
      bind('A', 'ARGV', spec.args),
      `local REST_KEYS, REST_ARGS = ${spec.keys.length + 1}, ${spec.args.length + 1}`,
      ...(spec.clock ? [REDIS_CLOCK] : []),
      spec.lua.trim(),
    ].join('\n');
    this.sha = createHash('sha1').update(this.lua).digest('hex');
  }

  /** KEYS and ARGV in the order the Lua reads them; `rest`: a batch after the named ones. */
  call(keys: Record<K, string>, args: Record<A, string | number>, rest: { keys?: readonly string[]; args?: ReadonlyArray<string | number> } = {}): ScriptCall {
    return {
      script: this as unknown as Script<string, string>,
      keys: [...this.spec.keys.map((k) => keys[k]), ...(rest.keys ?? [])],
      args: [...this.spec.args.map((a) => args[a]), ...(rest.args ?? [])],
    };
  }
}
