/**
 * A context store for tests in which several Node-RED processes share their
 * context through the suite's Redis (settings.js: contextStorage: { shared: {
 * module: require('<this file>'), config: { url } } }). Each scope is a hash
 * whose fields are property paths (parts joined by \u0001) holding JSON: a set
 * replaces a path and everything under it in one Lua call; a get assembles
 * the value from its path's fields. O(fields) per call: for tests only.
 */
import { Redis } from 'ioredis';

type Callback = (err?: Error | null, ...values: unknown[]) => void;
const SEP = '\u0001';

/** `"a".b["c"]['d'][0]` → ['a', 'b', 'c', 'd', '0'] (the forms a flow's keys take). */
function pathParts(key: string): string[] {
  const parts: string[] = [];
  let i = 0;
  const quoted = (q: string) => {
    const end = key.indexOf(q, i + 1);
    if (end < 0) throw new Error(`unterminated key: ${key}`);
    const s = key.slice(i + 1, end);
    i = end + 1;
    return s;
  };
  while (i < key.length) {
    const c = key[i];
    if (c === '.') i++;
    else if (c === '"' || c === "'") parts.push(quoted(c));
    else if (c === '[') {
      i++;
      if (key[i] === '"' || key[i] === "'") parts.push(quoted(key[i]));
      else {
        const end = key.indexOf(']', i);
        parts.push(key.slice(i, end));
        i = end;
      }
      i++; // ]
    } else {
      let j = i;
      while (j < key.length && key[j] !== '.' && key[j] !== '[') j++;
      parts.push(key.slice(i, j));
      i = j;
    }
  }
  return parts;
}

const REPLACE = `
local h, p = KEYS[1], ARGV[1]
local pre = p .. '${SEP}'
for _, f in ipairs(redis.call('HKEYS', h)) do
  if f == p or string.sub(f, 1, #pre) == pre then redis.call('HDEL', h, f) end
end
if ARGV[2] ~= '' then redis.call('HSET', h, p, ARGV[2]) end
return 1`;

function assemble(fields: Record<string, string>, path: string[]): unknown {
  const root: Record<string, unknown> = {};
  const entries = Object.entries(fields)
    .map(([f, v]) => ({ parts: f.split(SEP), v }))
    .filter((e) => e.parts[0] === path[0])
    .sort((a, b) => a.parts.length - b.parts.length);
  for (const e of entries) {
    let o: Record<string, unknown> = root;
    for (let k = 0; k < e.parts.length - 1; k++) {
      const next = o[e.parts[k]];
      o = (next && typeof next === 'object' ? next : (o[e.parts[k]] = {})) as Record<string, unknown>;
    }
    o[e.parts[e.parts.length - 1]] = JSON.parse(e.v);
  }
  let v: unknown = root;
  for (const p of path) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
  return v;
}

export = function redisContextStore(config: { url: string; prefix?: string }) {
  let redis: Redis;
  const prefix = config.prefix ?? 'test-context:';
  const hash = (scope: string) => prefix + scope;
  return {
    async open(): Promise<void> {
      redis = new Redis(config.url, { lazyConnect: true, maxRetriesPerRequest: 2 });
      await redis.connect();
      redis.defineCommand('replacePath', { numberOfKeys: 1, lua: REPLACE });
    },
    async close(): Promise<void> {
      redis?.disconnect();
    },
    get(scope: string, key: string | string[], cb: Callback): void {
      const keys = Array.isArray(key) ? key : [key];
      redis.hgetall(hash(scope)).then(
        (fields) => cb(null, ...keys.map((k) => assemble(fields, pathParts(k)))),
        (err: Error) => cb(err),
      );
    },
    set(scope: string, key: string | string[], value: unknown, cb?: Callback): void {
      const keys = Array.isArray(key) ? key : [key];
      const values = Array.isArray(key) ? (value as unknown[]) : [value];
      const run = async () => {
        for (let i = 0; i < keys.length; i++) {
          const v = values[i];
          await (redis as unknown as { replacePath(h: string, p: string, v: string): Promise<unknown> }).replacePath(hash(scope), pathParts(keys[i]).join(SEP), v === undefined ? '' : JSON.stringify(v));
        }
      };
      run().then(
        () => cb?.(null),
        (err: Error) => cb?.(err),
      );
    },
    keys(scope: string, cb: Callback): void {
      redis.hkeys(hash(scope)).then(
        (fields) => cb(null, [...new Set(fields.map((f) => f.split(SEP)[0]))]),
        (err: Error) => cb(err),
      );
    },
    async delete(scope: string): Promise<void> {
      await redis.del(hash(scope));
    },
    async clean(): Promise<void> {
      // Nothing: the suite's Redis is thrown away with the suite.
    },
  };
};
