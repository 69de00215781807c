/**
 * Messages for whoever holds an item (a charging-control wish reaching any
 * replica, for the one that holds the connector): a hash per scope, item ->
 * "<seq>:<text>", the newest message of each item, and "#seq", the counter
 * every post takes its number from, so that a holder tells a newer message
 * from one it applied already.
 */
import type { Posted } from '../../coordination/leases';
import type { FleetConnection } from '../redis/connection';
import { Script } from '../redis/script';

/** Keeps `text` as the item's newest message under the next sequence number; returns it. */
export const POST = new Script({
  name: 'post',
  durable: true,
  keys: ['inbox'],
  args: ['item', 'text'],
  lua: `
local seq = redis.call('HINCRBY', K.inbox, '#seq', 1)
redis.call('HSET', K.inbox, A.item, seq .. ':' .. A.text)
return seq`,
});

export class Inbox {
  constructor(
    private readonly conn: FleetConnection,
    private readonly key: string,
  ) {}

  async post(item: string, text: string): Promise<number> {
    return Number(await this.conn.eval(POST.call({ inbox: this.key }, { item, text })));
  }

  /** The newest message of each item (null: none); a Redis failure reads as none (the next cycle reads again). */
  async newest(items: string[]): Promise<Map<string, Posted | null>> {
    const out = new Map<string, Posted | null>();
    if (items.length === 0) return out;
    let raw: Array<string | null>;
    try {
      raw = await this.conn.run('reading messages', (r) => r.hmget(this.key, ...items));
    } catch {
      return out;
    }
    items.forEach((item, i) => out.set(item, parsePosted(raw[i])));
    return out;
  }

  /** The scope's messages, gone (its node was removed). */
  forget(): Promise<unknown> {
    return this.conn.run('forgetting messages', (r) => r.del(this.key));
  }
}

function parsePosted(raw: string | null | undefined): Posted | null {
  if (typeof raw !== 'string') return null;
  const colon = raw.indexOf(':');
  const seq = Number(raw.slice(0, colon));
  return colon > 0 && Number.isFinite(seq) ? { seq, text: raw.slice(colon + 1) } : null;
}
