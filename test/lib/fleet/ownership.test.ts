/**
 * Each watched token polled by one replica: leases, rendezvous spread,
 * hand-over when replicas join and leave, the reported state kept with
 * compare-and-set, against a real Redis. Replicas are library instances in
 * this process (each with its own connection and id); the kill -9 case with
 * real processes is in takeover.test.ts.
 */
import assert from 'node:assert/strict';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';
import type { RedisLeaseScope } from '../../../nodes/lib/fleet/leases/lease-scope';
import type { LeaseChange } from '../../../nodes/lib/coordination/leases';
import { Rendezvous } from '../../../nodes/lib/fleet/membership/rendezvous';
import { COMMIT_STATE } from '../../../nodes/lib/fleet/leases/state-commit';
import { decodeState } from '../../../nodes/lib/fleet/leases/state-codec';
import { until } from '../../harness';
import { eventually, fleetSuite, ownershipSampler, sleep, FAST } from './fleet-fixture';

const TOKENS = Array.from({ length: 300 }, (_, i) => `RFID-${String(i).padStart(4, '0')}`);

interface Replica {
  fleet: Fleet;
  own: RedisLeaseScope<{ n: number }>;
  changes: LeaseChange<{ n: number }>[];
}

describe('fleet: watched tokens owned through leases (real Redis)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  const SCOPE = 'watch-node-1';

  function replica(): Replica {
    const fleet = suite.replica();
    const changes: LeaseChange<{ n: number }>[] = [];
    const own = fleet.scope<{ n: number }>(SCOPE, { onChange: (c) => changes.push(c) });
    return { fleet, own, changes };
  }
  const ownedBy = (rs: Replica[]) => rs.map((r) => r.own.owned());
  const exactlyOnce = (rs: Replica[], tokens: string[]) => {
    const all = ownedBy(rs).flat();
    return all.length === tokens.length && new Set(all).size === tokens.length;
  };

  it('300 tokens across three replicas: each owned by exactly one, evenly, as the leases in Redis say', async () => {
    const rs = [replica(), replica(), replica()];
    await rs[0].own.add(TOKENS);
    // The first replica in takes everything until it sees the others: wait for all three to see all three.
    await until(() => rs.every((r) => r.own.replicas().length === 3 && r.own.owned().length > 0) && exactlyOnce(rs, TOKENS), 'every token owned exactly once', 8_000);
    const counts = ownedBy(rs).map((o) => o.length);
    for (const c of counts) assert.ok(c >= 60 && c <= 140, `spread: ${counts.join(' / ')}`);
    // Each replica owns what rendezvous hashing over the three gives it, and Redis holds its lease.
    const hrw = new Rendezvous(rs.map((r) => r.fleet.replicaId));
    const admin = suite.redis.admin();
    for (const r of rs) {
      const owned = r.own.owned();
      assert.ok(owned.every((t) => hrw.ownerOf(t) === r.fleet.replicaId));
      const holders = await admin.mget(...owned.map((t) => r.fleet.keys.scope(SCOPE).lease(t)));
      assert.ok(holders.every((h) => h === r.fleet.replicaId));
    }
    // The other replicas heard of the list through Redis, not through watch().
    assert.deepEqual(rs[2].own.items().sort(), TOKENS);
  });

  it('a replica joining and one leaving hand tokens over with never two pollers at once', async () => {
    const tokens = TOKENS.slice(0, 90);
    const rs = [replica(), replica()];
    const sampler = ownershipSampler(() => rs, tokens);
    try {
      await rs[0].own.add(tokens);
      await until(() => rs.every((r) => r.own.replicas().length === 2 && r.own.owned().length > 0) && exactlyOnce(rs, tokens), 'two replicas own all', 8_000);
      rs.push(replica());
      await until(() => exactlyOnce(rs, tokens) && rs[2].own.owned().length > 0, 'the newcomer got its share', 8_000);
      const gone = rs.shift() as Replica;
      const had = gone.own.owned();
      await gone.fleet.close(); // a clean stop gives the leases back: no wait for the lease time
      assert.ok(had.length > 0);
      await until(() => exactlyOnce(rs, tokens), 'the two left own all', 8_000);
      const released = rs.flatMap((r) => r.changes.flatMap((c) => c.released));
      assert.ok(released.every((x) => x.reason === 'rebalanced'), 'tokens moved only because of the newcomer');
    } finally {
      sampler.stop();
    }
    assert.equal(sampler.worst.owners, 1, `two replicas could poll ${sampler.worst.token} at the same moment`);
  });

  it('the reported state is kept with compare-and-set: only the lease holder writes, and the next owner resumes from it', async () => {
    const [a, b] = [replica(), replica()];
    const token = 'RFID-STATE';
    await a.own.add([token]);
    await until(() => [a, b].every((r) => r.own.replicas().length === 2) && a.own.holds(token) !== b.own.holds(token), 'one owner, both replicas seen');
    const [owner, other] = a.own.holds(token) ? [a, b] : [b, a];
    const acquired = owner.changes.flatMap((c) => c.acquired).filter((x) => x.item === token).pop();
    assert.deepEqual(acquired, { item: token, saved: null }, 'nothing reported yet');
    const first = await owner.own.commit(token, { n: 1 });
    assert.ok(first.ok && first.rev > 1_000_000_000_000, `a state written from nothing starts at Redis's clock: ${JSON.stringify(first)}`);
    const r1 = first.ok ? first.rev : 0;
    assert.deepEqual(await owner.own.commit(token, { n: 2 }), { ok: true, rev: r1 + 1 });
    const refused = await other.own.commit(token, { n: 99 });
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.reason, 'not-owner');
    await owner.fleet.close();
    await until(() => other.own.holds(token), 'the other replica took over');
    const resumed = other.changes.flatMap((c) => c.acquired).filter((x) => x.item === token).pop();
    assert.deepEqual(resumed?.saved, { rev: r1 + 1, state: { n: 2 } }, 'the new owner resumes from the last committed state');
    assert.deepEqual(await other.own.commit(token, null), { ok: true, rev: r1 + 2 }, 'an end is kept as a tombstone with its revision');
  });

  it('a commit by a replica whose lease was taken over is refused (it must not emit)', async () => {
    const a = replica();
    await a.own.add(['RFID-X']);
    await until(() => a.own.holds('RFID-X'), 'owned');
    // Someone else holds the lease now (as after a lapse and a takeover), although this replica still believes it owns it.
    const admin = suite.redis.admin();
    await admin.set(a.fleet.keys.scope(SCOPE).lease('RFID-X'), 'another-replica', 'PX', 5_000);
    const res = await a.own.commit('RFID-X', { n: 1 });
    assert.equal(res.ok, false);
    assert.equal(a.own.holds('RFID-X'), false, 'it stops polling at once');
    assert.ok(a.changes.some((c) => c.released.some((r) => r.item === 'RFID-X' && r.reason === 'lease-lost' && /lease lost at \d{4}-/.test(r.message))));
    assert.equal(await admin.hget(a.fleet.keys.scope(SCOPE).state, 'RFID-X'), null, 'nothing written');
  });

  it('a poll answered just before the process stood still past the lease\'s local validity is still committed while Redis says the lease is ours', async () => {
    // A lease long enough that the stall ends before Redis lets it go: 3 s, valid here for 2.7 s from each renewal sent.
    const fleet = suite.replica({ cycleMs: 1_000, leaseMs: 3_000 });
    const own = fleet.scope<{ n: number }>('stall', {});
    await own.add(['STALL-1']);
    await until(() => own.holds('STALL-1'), 'owned', 5_000);
    const renewed = await fleet.connection.run('pttl', (r) => r.pttl(fleet.keys.scope('stall').lease('STALL-1')));
    // Stand still (a GC pause, a busy event loop) until the local validity is gone but Redis still holds the lease for us.
    const end = performance.now() + Math.max(0, renewed - 250);
    while (performance.now() < end || own.holds('STALL-1')) {
      if (performance.now() > end + 2_000) break;
    }
    assert.equal(own.holds('STALL-1'), false, 'no more polling on a lapsed local validity');
    const res = await own.commit('STALL-1', { n: 1 });
    assert.equal(res.ok, true, `committed: Redis still held the lease for this replica (${JSON.stringify(res)})`);
    assert.deepEqual(decodeState(await suite.redis.admin().hget(fleet.keys.scope('stall').state, 'STALL-1'))?.state, { n: 1 });
  });

  it('unwatch through any replica stops the owner and forgets the state; a Redis that lost its data gets the list back', async () => {
    const [a, b] = [replica(), replica()];
    await a.own.add(['RFID-A', 'RFID-B', 'RFID-C']);
    await until(() => [a, b].every((r) => r.own.replicas().length === 2) && exactlyOnce([a, b], ['RFID-A', 'RFID-B', 'RFID-C']), 'owned, both replicas seen');
    await b.own.remove(['RFID-B']);
    await until(() => exactlyOnce([a, b], ['RFID-A', 'RFID-C']) && a.own.items().length === 2, 'RFID-B dropped everywhere');
    assert.ok([a, b].some((r) => r.changes.some((c) => c.released.some((x) => x.item === 'RFID-B' && x.reason === 'unwatched'))));
    const admin = suite.redis.admin();
    await admin.flushall();
    await eventually(async () => (await admin.smembers(a.fleet.keys.scope(SCOPE).list)).length === 2, 'the list put back');
    assert.deepEqual((await admin.smembers(a.fleet.keys.scope(SCOPE).list)).sort(), ['RFID-A', 'RFID-C']);
    await until(() => exactlyOnce([a, b], ['RFID-A', 'RFID-C']), 'owned again');
  });

  it('a listener that throws is reported through onError, once, and the ownership goes on', async () => {
    const errors: string[] = [];
    const fleet = suite.replica();
    const own = fleet.scope<unknown>('throwing', {
      onChange: () => {
        throw new Error('listener broke');
      },
      onError: (e) => errors.push(e.message),
    });
    await own.add(['RFID-1', 'RFID-2']);
    await until(() => own.owned().length === 2, 'owned');
    await sleep(FAST.cycleMs * 4); // cycles with nothing new: nothing more to tell
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0], /listener broke/);
  });

  it('closing a watch at any moment of a cycle leaves no lease of it in Redis (the others need not wait for a lapse)', async () => {
    const admin = suite.redis.admin();
    for (let i = 0; i < 8; i++) {
      const fleet = suite.replica();
      const scope = `close-race-${i}`;
      const own = fleet.scope<unknown>(scope);
      await own.add(TOKENS.slice(0, 40)); // kicks a cycle that takes 40 leases
      await sleep(i * 3);
      await own.close();
      const keys = await admin.keys(`${fleet.keys.prefix}w:*:lease:*`);
      const holders = keys.length ? await admin.mget(...keys) : [];
      assert.deepEqual(holders.filter((h) => h === fleet.replicaId), [], `close ${i * 3} ms after the watch`);
      assert.equal(own.owned().length, 0);
    }
  });

  it('after close() nothing more is written to Redis, although the loop was busy', async () => {
    const a = replica();
    await a.own.add(TOKENS.slice(0, 50));
    await until(() => a.own.owned().length === 50, 'owned');
    const admin = suite.redis.admin();
    // MONITOR lists commands in the order Redis ran them: a marker sent after close() resolved is the boundary.
    const marker = `closed-${Date.now()}`;
    const seen: string[] = [];
    const monitor = await suite.redis.monitor((args) => {
      const line = args.join(' ');
      if (line.includes(marker) || line.includes(a.fleet.keys.prefix)) seen.push(line);
    });
    await sleep(FAST.cycleMs * 2);
    a.fleet.kick();
    await a.fleet.close();
    await admin.echo(marker);
    await sleep(FAST.cycleMs * 4);
    await admin.echo(`${marker}-end`);
    await eventually(async () => seen.some((l) => l.includes(`${marker}-end`)), 'the monitor saw the end marker');
    monitor.close();
    const at = seen.findIndex((l) => l.includes(marker));
    assert.ok(at > 0, 'the monitor saw the replica at work before close');
    assert.deepEqual(seen.slice(at + 1, -1), [], 'commands on the fleet keys after close()');
  });
  it('a commit is applied once: a retry under its id is "done", even after later commits; another id from an old revision is stale', async () => {
    const f = suite.replica();
    await f.connection.open();
    const keys = f.keys.scope('commit-ids');
    const admin = suite.redis.admin();
    await admin.set(keys.lease('T'), f.replicaId, 'PX', 10_000);
    const commit = (rev: number, id: string, json: string) => f.connection.eval(COMMIT_STATE.call({ lease: keys.lease('T'), state: keys.state }, { replica: f.replicaId, item: 'T', expectedRev: rev, json, commitId: id, heldByClock: '0' }));
    const [a, b, c] = ['a'.repeat(16), 'b'.repeat(16), 'c'.repeat(16)];
    const r1 = Number(await commit(0, a, '{"n":1}'));
    assert.ok(r1 > 1_000_000_000_000, 'written from nothing: the revision starts at Redis\'s clock');
    assert.equal(await commit(0, a, '{"n":1}'), r1, 'the same commit again: done, not stale');
    assert.equal(await commit(r1, b, '{"n":2}'), r1 + 1);
    assert.equal(await commit(0, a, '{"n":1}'), r1 + 1, 'still known after a later commit');
    assert.deepEqual(await commit(0, c, '{"n":9}'), [-2, r1 + 1], 'a new commit from an old revision is stale');
    assert.deepEqual(decodeState(await admin.hget(keys.state, 'T')), { rev: r1 + 1, state: { n: 2 } }, 'the later state was not overwritten by the old retry');
    await admin.set(keys.lease('T'), 'another', 'PX', 10_000);
    assert.equal(await commit(r1, b, '{"n":2}'), r1 + 1, 'done even once the lease has moved on: it was applied');
    assert.equal(await commit(2, c, '{"n":3}'), -1, 'a new commit needs the lease');

    // Redis lost its data: a commit still on its way from before the loss must not land on the new holder's state.
    await admin.set(keys.lease('U'), f.replicaId, 'PX', 10_000);
    const u = (rev: number, id: string, json: string) => f.connection.eval(COMMIT_STATE.call({ lease: keys.lease('U'), state: keys.state }, { replica: f.replicaId, item: 'U', expectedRev: rev, json, commitId: id, heldByClock: '0' }));
    const before = Number(await u(0, 'd'.repeat(16), '{"n":1}'));
    await admin.hdel(keys.state, 'U');
    await new Promise((r) => setTimeout(r, 5));
    const after = Number(await u(0, 'e'.repeat(16), '{"n":1}'));
    assert.ok(after > before, `revisions never start over: ${before} then ${after}`);
    assert.deepEqual(await u(before, 'f'.repeat(16), ''), [-2, after], 'a commit from before the loss is stale, not applied on top');
  });
});
