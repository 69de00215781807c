/**
 * An item's new state committed exactly once, only by its holder (docs/fleet.md,
 * "The watcher protocol"): a compare-and-set on the revision the holder loaded,
 * with a commit id of its own, the same on every retry, so that a try applied
 * whose answer was lost (a reconnect, a write pause) is recognised as done,
 * never as "stale". The caller emits what was committed only when the commit
 * is ok: the commit is the point of truth a new holder resumes from.
 */
import { randomBytes } from 'node:crypto';
import type { CommitResult } from '../../coordination/leases';
import { NOT_SENT } from '../redis/errors';
import type { FleetConnection } from '../redis/connection';
import { Backoff, RETRY, sleep } from '../redis/retry';
import { Script } from '../redis/script';
import { KEPT_COMMIT_IDS, STATE_CODEC_LUA } from './state-codec';

/**
 * Compare-and-set of one item's state by its lease holder, exactly once.
 * `json` '' = no session (a tombstone that keeps the revision); `heldByClock`
 * '1' while the replica still holds the item by its own clock. The last
 * KEPT_COMMIT_IDS commit ids applied are kept with the state: a retry whose
 * first try was applied finds its id there and succeeds (and, still the
 * newest and the lease ours, refreshes the state with the retry's). Returns
 * the revision, -1 when the lease is not ours, or {-2, current revision} when
 * the state moved on without us.
 *
 * A lease nobody holds (it went with Redis's data) does not refuse a commit
 * whose expected revision is the one there, from a replica that still holds
 * the item by its own clock: its lease cannot have lapsed in Redis, so no
 * other replica can have held the item and committed meanwhile (a restore can
 * bring an old revision back after a loss), and the compare-and-set keeps it
 * exactly once. With no state there and another revision expected, only the
 * holder may write from nothing.
 *
 * A state written from nothing starts at Redis's clock in ms, not at 1: after
 * Redis lost its data the revisions would otherwise start over, and a commit
 * still on its way from before the loss (retried under its id) would find the
 * revision it expects and be applied on top of the new holder's.
 */
export const COMMIT_STATE = new Script({
  name: 'commitState',
  durable: true,
  keys: ['lease', 'state'],
  args: ['replica', 'item', 'expectedRev', 'json', 'commitId', 'heldByClock'],
  clock: true,
  lua: `${STATE_CODEC_LUA}
local rev, ids = decodeState(redis.call('HGET', K.state, A.item))
local had = rev >= 0
if not had then rev = 0 end
local holder = redis.call('GET', K.lease)
local mine = holder == A.replica
local at = string.find(ids, A.commitId, 1, true)
if at then
  if at == 1 and mine then redis.call('HSET', K.state, A.item, encodeState(rev, ids, A.json)) end
  return rev
end
if not mine and (holder or A.heldByClock ~= '1') then return -1 end
if rev ~= tonumber(A.expectedRev) then
  if not mine then return -1 end
  return { -2, rev }
end
if had then rev = rev + 1 else rev = select(2, redisTime()) end
ids = string.sub(A.commitId .. ',' .. ids, 1, ${KEPT_COMMIT_IDS} * 17 - 1)
ids = string.gsub(ids, ',$', '')
redis.call('HSET', K.state, A.item, encodeState(rev, ids, A.json))
return rev`,
});

/** What a commit needs of the item's holding, read at each try. */
export interface CommitHold {
  /** the revision the holder loaded or last wrote */
  rev: number;
  /** a commit whose answer never came: its id, reused by the next commit from the same revision */
  unresolved: { rev: number; id: string } | null;
}

/** Redis's answer to a commit: the revision written, not ours (-1), or the state moved on (its revision). */
export type CommitAnswer = { kind: 'written'; rev: number } | { kind: 'not-owner' } | { kind: 'stale'; rev: number };

/**
 * One commit of `json` ('' = none) from the hold's revision, retried under
 * one id until Redis answers or `retryMs` passes: a try whose answer was lost
 * may have been applied, so the retries go on whatever happened to the lease
 * meanwhile, and Redis says (the caller checks the hold before the first).
 * `heldByClock()`: whether the replica still holds the item by its own clock,
 * asked at every try. Resolves with Redis's answer, or a CommitResult
 * 'unavailable' (the id then stays in the hold for the next commit from the
 * same revision).
 */
export async function commitOnce(
  conn: FleetConnection,
  at: { lease: string; state: string; replica: string; item: string },
  hold: CommitHold,
  json: string,
  opts: { retryMs: number; now: () => number; heldByClock: () => boolean },
): Promise<CommitAnswer | CommitResult> {
  const from = hold.rev;
  const id = hold.unresolved?.rev === from ? hold.unresolved.id : randomBytes(8).toString('hex');
  const deadline = opts.now() + opts.retryMs;
  const backoff = new Backoff(RETRY);
  let sent = false;
  for (;;) {
    try {
      const call = COMMIT_STATE.call({ lease: at.lease, state: at.state }, { replica: at.replica, item: at.item, expectedRev: from, json, commitId: id, heldByClock: opts.heldByClock() ? '1' : '0' });
      const res = await conn.eval(call);
      hold.unresolved = null;
      if (typeof res === 'number' && res > 0) return { kind: 'written', rev: res };
      if (Array.isArray(res)) return { kind: 'stale', rev: Number(res[1]) };
      return { kind: 'not-owner' };
    } catch (err) {
      const error = conn.toError(err, 'keeping a state');
      // Not connected at the first try: nothing went out, nothing to resolve.
      if (!sent && NOT_SENT.test(String((err as Error)?.message))) return { ok: false, reason: 'unavailable', message: error.message };
      sent = true;
      const left = deadline - opts.now();
      if (error.code === 'CLOSED' || left <= 0) {
        hold.unresolved = { rev: from, id };
        return { ok: false, reason: 'unavailable', message: error.message };
      }
      await sleep(Math.min(backoff.next(), left));
    }
  }
}
