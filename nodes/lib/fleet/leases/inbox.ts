/**
 * Messages for whoever holds an item (a charging-control wish reaching any
 * replica, for the one that holds the connector): a hash per scope, item ->
 * "<seq>:<text>", the newest message of each item, and "#seq", the last
 * number a post took, so that a holder tells a newer message from one it
 * applied already. A holder keeps the number it applied with its state,
 * which outlives a Redis that lost its data (it is put back); so the numbers
 * never go back either: each is above the last one and at least Redis's
 * clock in µs, which a restart does not turn back.
 */
import { monotonicNow } from '../../clock';
import type { Posted } from '../../coordination/leases';
import type { FleetConnection } from '../redis/connection';
import { retryUntil, RIDE_THROUGH_MS, transient } from '../redis/retry';
import { Script } from '../redis/script';

/** Keeps `text` as the item's newest message under the next number (above the last, at least Redis's clock in µs); returns it. */
export const POST = new Script({
  name: 'post',
  durable: true,
  keys: ['inbox'],
  args: ['item', 'text'],
  clock: true,
  lua: `
local us = redisTime()
local seq = math.max((tonumber(redis.call('HGET', K.inbox, '#seq')) or 0) + 1, us)
local text = string.format('%.0f', seq)
redis.call('HSET', K.inbox, '#seq', text, A.item, text .. ':' .. A.text)
return text`,
});

export class Inbox {
  /** per item, the post being tried: a newer one for the same item waits for its attempt in flight, then replaces it */
  private readonly posting = new Map<string, { replaced: boolean; attempt: Promise<unknown> }>();

  constructor(
    private readonly conn: FleetConnection,
    private readonly key: string,
  ) {}

  /**
   * Posts, trying again while Redis does not take it (RIDE_THROUGH_MS). Posts
   * of one item keep their order: a newer one waits for the older one's
   * attempt in flight (which may land) and the older one is not tried again;
   * it resolves with null (replaced), so only the newest message counts.
   */
  async post(item: string, text: string): Promise<number | null> {
    const before = this.posting.get(item);
    const mine = { replaced: false, attempt: Promise.resolve() as Promise<unknown> };
    this.posting.set(item, mine);
    if (before) {
      before.replaced = true;
      await before.attempt.catch(() => undefined);
    }
    const once = (): Promise<number> => {
      const attempt = this.conn.eval(POST.call({ inbox: this.key }, { item, text })).then(Number);
      mine.attempt = attempt;
      return attempt;
    };
    try {
      return await retryUntil(once, { deadline: monotonicNow() + RIDE_THROUGH_MS, now: monotonicNow, stop: (err) => mine.replaced || !transient(err) });
    } catch (err) {
      if (mine.replaced) return null;
      throw err;
    } finally {
      if (this.posting.get(item) === mine) this.posting.delete(item);
    }
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
