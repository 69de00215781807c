/**
 * Leases taken, renewed and given back in batches (docs/fleet.md, "Leases and
 * hand-over"): one short script per LEASE_BATCH keys, so that a scope of
 * thousands of items costs a few round trips per cycle and never blocks Redis
 * for long. A lease is a key holding the replica's id with a TTL; only its
 * holder renews or deletes it.
 */
import type { FleetConnection } from '../redis/connection';
import { Script } from '../redis/script';

/** Keys per script call. */
export const LEASE_BATCH = 500;

/**
 * KEYS: the lease keys, the first `wanted` of them to take or renew, the rest
 * to give back. Per wanted key: 2 = taken now, 1 = renewed (already ours),
 * 0 = held by another replica. A key given back is deleted only while it is
 * ours (a lease that lapsed and was taken by another replica is left alone).
 */
export const LEASES = new Script({
  name: 'leases',
  keys: [],
  args: ['replica', 'leaseMs', 'wanted'],
  lua: `
local n = tonumber(A.wanted)
local out = {}
for i = 1, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if i <= n then
    if holder == A.replica then redis.call('PEXPIRE', KEYS[i], A.leaseMs); out[i] = 1
    elseif not holder then redis.call('SET', KEYS[i], A.replica, 'PX', A.leaseMs); out[i] = 2
    else out[i] = 0 end
  else
    if holder == A.replica then redis.call('DEL', KEYS[i]) end
    out[i] = 0
  end
end
return out`,
});

/**
 * Takes or renews the leases of `wanted` and gives back those of `released`,
 * batch by batch; `renewed(item, result, sentAt)` for each wanted one, with
 * the monotonic time its batch was sent (a lease is valid from then).
 */
export async function leaseBatches(
  conn: FleetConnection,
  keyOf: (item: string) => string,
  who: { replica: string; leaseMs: number; now: () => number },
  wanted: string[],
  released: string[],
  renewed: (item: string, result: number, sentAt: number) => void,
): Promise<void> {
  const wantedSet = new Set(wanted);
  const all = [...wanted, ...released];
  for (let i = 0; i < all.length; i += LEASE_BATCH) {
    const batch = all.slice(i, i + LEASE_BATCH);
    const want = batch.filter((t) => wantedSet.has(t)).length;
    const sentAt = who.now();
    const res = (await conn.eval(LEASES.call({}, { replica: who.replica, leaseMs: who.leaseMs, wanted: want }, { keys: batch.map(keyOf) }))) as number[];
    for (let j = 0; j < want; j++) renewed(batch[j], res[j], sentAt);
  }
}
