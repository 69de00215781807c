/**
 * A lease scope's list (a watch node's tokens, a control node's targets) as
 * the fleet keeps it: a set in Redis and a version bumped at every change, so
 * that a replica reads the set only when the version it sees has moved.
 */
import type { FleetConnection } from '../redis/connection';
import type { ScopeKeys } from '../redis/keys';
import { Script } from '../redis/script';
import { LEASE_BATCH } from './lease-batch';

/**
 * Adds ('+') or removes ('-') the items in ARGV from REST_ARGS on, and bumps
 * the version when anything changed (or when there is none yet). Removing an
 * item forgets its state too. Returns the version.
 */
export const ITEM_LIST = new Script({
  name: 'itemList',
  durable: true,
  keys: ['list', 'version', 'state'],
  args: ['op'],
  lua: `
local add = A.op == '+'
local changed = 0
for i = REST_ARGS, #ARGV do
  if add then changed = changed + redis.call('SADD', K.list, ARGV[i])
  else
    changed = changed + redis.call('SREM', K.list, ARGV[i])
    redis.call('HDEL', K.state, ARGV[i])
  end
end
if changed > 0 or redis.call('EXISTS', K.version) == 0 then return redis.call('INCR', K.version) end
return tonumber(redis.call('GET', K.version))`,
});

export class ItemList {
  private list = new Set<string>();
  private version: string | null = null;

  constructor(
    private readonly conn: FleetConnection,
    private readonly keys: ScopeKeys,
  ) {}

  /** The list as last read or changed here. */
  get items(): Set<string> {
    return this.list;
  }

  has(item: string): boolean {
    return this.list.has(item);
  }

  get size(): number {
    return this.list.size;
  }

  /** Adds or removes items in Redis (in batches), then here. */
  async change(op: '+' | '-', items: string[]): Promise<void> {
    for (let i = 0; i < items.length; i += LEASE_BATCH) {
      await this.conn.eval(ITEM_LIST.call({ list: this.keys.list, version: this.keys.version, state: this.keys.state }, { op }, { args: items.slice(i, i + LEASE_BATCH) }));
    }
    for (const t of items) {
      if (op === '+') this.list.add(t);
      else this.list.delete(t);
    }
  }

  /** The version the heartbeat read: the set is read again when it moved. Returns true when it was read. */
  async follow(version: string | null): Promise<boolean> {
    if (version === this.version) return false;
    const members = await this.conn.run('reading the list', (r) => r.smembers(this.keys.list));
    this.list = new Set(members);
    this.version = version;
    return true;
  }
}
