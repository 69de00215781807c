/**
 * Redis lost its data (restarted without persistence, FLUSHALL) under a
 * replica that keeps its lease (found by the nemesis over processes,
 * test/fleet-process-chaos.ts): the lease is taken again at the next cycle,
 * but the token's state is gone, so the next commit, which expects the
 * revision the replica last wrote, was refused as "stale" and the token
 * dropped: the change it carried (an `ended`) was not emitted, and the next
 * owner, seeded from nothing, never reported it.
 */
import assert from 'node:assert/strict';
import { until } from '../../harness';
import { decodeState } from '../../../nodes/lib/fleet/leases/state-codec';
import { Fleet } from '../../../nodes/lib/fleet/fleet';
import { RedisServer } from '../../redis-server';
import { RedisNemesis } from '../../redis-nemesis';
import { COMMIT_STATE } from '../../../nodes/lib/fleet/leases/state-commit';
import { RESTORE_STATES } from '../../../nodes/lib/fleet/leases/recovery';
import { DataLossWatch } from '../../../nodes/lib/fleet/leases/recovery';
import type { AcquiredItem } from '../../../nodes/lib/coordination/leases';
import { fleetSuite, sleep, FAST } from './fleet-fixture';

describe('fleet: Redis lost its data under a replica that keeps its lease', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('the holder commits its next state from nothing: ok, not stale, and the token stays held', async () => {
    const fleet = suite.replica();
    const own = fleet.scope<{ tx: string }>('loss', {});
    await own.add(['LOSS-T']);
    await until(() => own.holds('LOSS-T'), 'the lease taken', 5_000);
    const first = await own.commit('LOSS-T', { tx: 'TX-1' });
    assert.ok(first.ok, JSON.stringify(first));
    assert.deepEqual(await own.commit('LOSS-T', { tx: 'TX-1' }), { ok: true, rev: (first.ok ? first.rev : 0) + 1 });
    await suite.redis.admin().flushall();
    await sleep(3 * FAST.cycleMs); // the lease is taken again (the key is free), the list put back
    assert.ok(own.holds('LOSS-T'), 'still held');
    const ended = await own.commit('LOSS-T', null);
    assert.equal(ended.ok, true, `the session's end is committed: ${JSON.stringify(ended)}`);
    assert.ok(own.holds('LOSS-T'), 'still held after the commit');
  });

  it("a poll answered as Redis lost its data: its change is kept although the lease went with the data (nobody holds it), unless it expects a state that is gone, and never over another replica's lease", async () => {
    // Cycles long enough that the lease is not taken again before the commits below.
    const fleet = suite.replica({ cycleMs: 5_000, leaseMs: 15_000 });
    const own = fleet.scope<{ tx: string }>('gone', {});
    const keys = fleet.keys.scope('gone');
    const admin = suite.redis.admin();
    await own.add(['G-NEW', 'G-OLD', 'G-OTHER']);
    await until(() => ['G-NEW', 'G-OLD', 'G-OTHER'].every((t) => own.holds(t)), 'the leases taken', 5_000);
    assert.ok((await own.commit('G-OLD', { tx: 'TX-0' })).ok, 'G-OLD has a state before the loss');
    await admin.flushall();
    // G-NEW never had a state: the poll's first change (a session seen) is what Redis should hold now.
    const seen = await own.commit('G-NEW', { tx: 'TX-1' });
    assert.equal(seen.ok, true, `a session seen as the data went is kept, not lost: ${JSON.stringify(seen)}`);
    assert.equal(await admin.exists(keys.lease('G-NEW')), 0, 'the commit did not take the lease: the next cycle does');
    assert.deepEqual(decodeState(await admin.hget(keys.state, 'G-NEW'))?.state, { tx: 'TX-1' });
    // G-OLD expects its state from before the loss: another replica may know a newer one, so only its holder writes from nothing.
    const old = await own.commit('G-OLD', null);
    assert.equal(old.ok, false, `a change over a state that went with the data waits for the lease: ${JSON.stringify(old)}`);
    assert.equal(await admin.hget(keys.state, 'G-OLD'), null);
    // The script itself: a free lease is taken for ours only when the caller says it still holds the token by its own clock.
    await fleet.connection.open();
    const commitFree = (held: string) => fleet.connection.eval(COMMIT_STATE.call({ lease: keys.lease('G-FREE'), state: keys.state }, { replica: fleet.replicaId, item: 'G-FREE', expectedRev: '0', json: JSON.stringify({ tx: 'TX-3' }), commitId: `${held}000000000000000`.slice(0, 16), heldByClock: held }));
    assert.equal(await commitFree('0'), -1, 'a replica whose lease lapsed by its own clock: another may have held the token meanwhile');
    assert.ok(Number(await commitFree('1')) > 0, 'still held by its own clock: kept');
    await admin.set(keys.lease('G-OTHER'), 'another-replica');
    const other = await own.commit('G-OTHER', { tx: 'TX-2' });
    assert.equal(other.ok, false, `another replica's lease refuses it: ${JSON.stringify(other)}`);
    assert.equal(await admin.hget(keys.state, 'G-OTHER'), null);
  });

  it('the holder puts its states back as soon as it sees the loss, so that the next holder resumes from them, and commits on from there', async () => {
    const fleet = suite.replica();
    const own = fleet.scope<{ tx: string }>('restore', {});
    const keys = fleet.keys.scope('restore');
    const admin = suite.redis.admin();
    await own.add(['R-1', 'R-2']);
    await until(() => own.holds('R-1') && own.holds('R-2'), 'both leases taken', 5_000);
    assert.ok((await own.commit('R-1', { tx: 'TX-1' })).ok);
    assert.ok((await own.commit('R-2', null)).ok);
    await admin.flushall();
    for (let i = 0; i < 50 && (await admin.hget(keys.state, 'R-1')) === null; i++) await sleep(100);
    assert.deepEqual(decodeState(await admin.hget(keys.state, 'R-1'))?.state, { tx: 'TX-1' }, 'a session seen: the next holder must not take it for new');
    assert.deepEqual(decodeState(await admin.hget(keys.state, 'R-2'))?.state, null, 'no session: kept as such');
    await until(() => own.holds('R-1'), 'the lease held again', 5_000);
    const next = await own.commit('R-1', { tx: 'TX-2' });
    assert.equal(next.ok, true, `the next commit follows the state put back: ${JSON.stringify(next)}`);
  });

  it('a lease that lapsed while Redis was away: its state is put back too when Redis comes back without its data', async () => {
    const redis = await RedisServer.start({ persist: false });
    const fleet = new Fleet({ url: redis.url, fleetKey: `lapsed-${process.pid}`, ...FAST });
    try {
      const own = fleet.scope<{ tx: string }>('lapsed', {});
      await own.add(['L-1']);
      await until(() => own.holds('L-1'), 'the lease taken', 5_000);
      assert.ok((await own.commit('L-1', { tx: 'TX-1' })).ok);
      await redis.stop();
      await until(() => !own.holds('L-1'), 'the lease lapsed locally', 5_000);
      await redis.start();
      const admin = redis.admin();
      const key = fleet.keys.scope('lapsed').state;
      for (let i = 0; i < 60 && (await admin.hget(key, 'L-1').catch(() => null)) === null; i++) await sleep(100);
      assert.deepEqual(decodeState(await admin.hget(key, 'L-1'))?.state, { tx: 'TX-1' }, 'the last holder put back the state of the lease it lost while Redis was away');
    } finally {
      await fleet.close();
      await redis.close();
    }
  });

  it('the last holder reconnects after the others: a token they take with no state waits for it to put its state back, and resumes from it', async () => {
    // Cycles long enough that the loss mark (2 s + 2 cycles) outlasts the late holder's reconnection.
    const timing = { cycleMs: 500, leaseMs: 1_500, commandTimeoutMs: 400, connectTimeoutMs: 1_000 };
    const redis = await RedisServer.start({ persist: false });
    const lateLink = await RedisNemesis.start(redis.port);
    const fleetKey = `late-${process.pid}`;
    const early = new Fleet({ url: redis.url, fleetKey, ...timing });
    const late = new Fleet({ url: lateLink.urlFor(redis.url), fleetKey, ...timing });
    const t0 = Date.now();
    const taken: Array<{ by: string; token: string; state: unknown; ms: number }> = [];
    const listen = (by: string) => ({ onChange: (c: { acquired: AcquiredItem<{ tx: string }>[] }) => c.acquired.forEach((a) => taken.push({ by, token: a.item, state: a.saved ? a.saved.state : 'nothing', ms: Date.now() - t0 })) });
    try {
      const ownEarly = early.scope<{ tx: string }>('late', listen('early'));
      const ownLate = late.scope<{ tx: string }>('late', listen('late'));
      // Rendezvous over random replica ids: with n tokens, all on one replica has odds 2^(1-n); 24 makes it 1 in 8 million.
      const tokens = Array.from({ length: 24 }, (_, i) => `LATE-${i}`);
      await ownEarly.add(tokens);
      await until(() => ownEarly.owned().length > 0 && ownLate.owned().length > 0 && ownEarly.owned().length + ownLate.owned().length === tokens.length, 'the tokens spread over both', 10_000);
      const lateOnes = ownLate.owned();
      for (const t of lateOnes) assert.ok((await ownLate.commit(t, { tx: `TX-${t}` })).ok, `${t} committed`);
      for (const t of ownEarly.owned()) assert.ok((await ownEarly.commit(t, null)).ok, `${t} committed`);
      taken.length = 0;
      // The late holder is cut off while Redis restarts without its data; the early one comes back at once.
      lateLink.blackhole();
      const cutAt = Date.now() - t0;
      await redis.stop();
      await redis.start();
      const backAt = Date.now() - t0;
      // The early replica is back once it wrote the new epoch; it then holds the late one's tokens (lone member).
      const admin = redis.admin();
      const epochKey = early.keys.scope('late').epoch;
      for (let i = 0; i < 100 && (await admin.get(epochKey).catch(() => null)) === null; i++) await sleep(50);
      await sleep(600);
      lateLink.heal();
      const healedAt = Date.now() - t0;
      await until(() => lateOnes.every((t) => taken.some((a) => a.token === t)), "the late holder's tokens taken again", 15_000);
      for (const t of lateOnes) {
        const got = taken.filter((a) => a.token === t);
        assert.ok(
          got.every((a) => JSON.stringify(a.state) === JSON.stringify({ tx: `TX-${t}` })),
          `${t} resumed from the state its last holder put back, never from nothing: ${JSON.stringify(got)} (cut ${cutAt} ms, Redis back ${backAt} ms, healed ${healedAt} ms)`,
        );
      }
    } finally {
      lateLink.heal();
      await Promise.all([early.close(), late.close()]);
      await lateLink.close();
      await redis.close();
    }
  });

  it('a replica started after the loss is back first (it knows no epoch, so it writes no mark): the tokens it took from nothing resume from the states the last holder puts back later', async () => {
    const timing = { cycleMs: 300, leaseMs: 900, commandTimeoutMs: 300, connectTimeoutMs: 1_000 };
    const redis = await RedisServer.start({ persist: false });
    const holderLink = await RedisNemesis.start(redis.port);
    const fleetKey = `fresh-${process.pid}`;
    const holder = new Fleet({ url: holderLink.urlFor(redis.url), fleetKey, ...timing });
    let fresh: Fleet | null = null;
    const last = new Map<string, { by: string; state: unknown }>();
    const listen = (by: string) => ({ onChange: (c: { acquired: AcquiredItem<{ tx: string }>[] }) => c.acquired.forEach((a) => last.set(a.item, { by, state: a.saved ? a.saved.state : 'nothing' })) });
    try {
      const ownHolder = holder.scope<{ tx: string }>('fresh', listen('holder'));
      const tokens = Array.from({ length: 24 }, (_, i) => `FRESH-${i}`);
      await ownHolder.add(tokens);
      await until(() => ownHolder.owned().length === tokens.length, 'the lone replica holds every token', 5_000);
      for (const t of tokens) assert.ok((await ownHolder.commit(t, { tx: `TX-${t}` })).ok, `${t} committed`);
      holderLink.blackhole();
      await redis.stop();
      await redis.start();
      // A process started now: its first heartbeat finds no epoch, and it has none of its own to compare.
      fresh = new Fleet({ url: redis.url, fleetKey, ...timing });
      const ownFresh = fresh.scope<{ tx: string }>('fresh', listen('fresh'));
      await ownFresh.add(tokens);
      await until(() => tokens.every((t) => last.get(t)?.by === 'fresh'), 'the fresh replica took every token', 5_000);
      holderLink.heal();
      await until(() => ownHolder.replicas().length === 2 && ownFresh.replicas().length === 2, 'both members', 10_000);
      const behind = () => tokens.filter((t) => JSON.stringify(last.get(t)?.state) !== JSON.stringify({ tx: `TX-${t}` }));
      await until(() => behind().length === 0, 'every token resumed from its state', 10_000).catch(() => assert.fail(`polled from nothing although their last holder put their states back: ${JSON.stringify(behind().map((t) => [t, last.get(t)]))}`));
    } finally {
      holderLink.heal();
      await Promise.all([holder.close(), fresh?.close()]);
      await holderLink.close();
      await redis.close();
    }
  });

  it('the restores counter is read with the epoch: a counter that started over after a loss and came back to the value seen before still says reload', () => {
    const watch = new DataLossWatch(100, () => 0);
    watch.heard('E1', -2, false, null);
    watch.heard('E1', -2, false, '1');
    assert.equal(watch.mustReload, true, 'a restore counted');
    watch.reloaded();
    watch.heard('E1', -2, false, '1');
    assert.equal(watch.mustReload, false, 'nothing new');
    watch.heard('E2', -2, false, '1');
    assert.equal(watch.mustReload, true, 'another epoch: the same count is another restore');
  });

  it('what the replicas put back: the newest revision known wins in whatever order they come, and a state committed since the loss is never overwritten', async () => {
    const fleet = suite.replica();
    const own = fleet.scope<{ tx: string }>('newest', {});
    const key = fleet.keys.scope('newest').state;
    const { lossMark: mark, restores } = fleet.keys.scope('newest');
    await own.add(['N-1']);
    await until(() => own.holds('N-1'), 'the lease taken', 5_000);
    await fleet.connection.open();
    const restore = (rev: number, tx: string) => fleet.connection.eval(RESTORE_STATES.call({ state: key, lossMark: mark, restores }, { replica: fleet.replicaId }, { args: ['N-0', String(rev), JSON.stringify({ tx })] }));
    assert.deepEqual(await restore(1_000, 'newer'), [1_000], 'nothing there: written');
    assert.deepEqual(await restore(999, 'older'), [1_000], 'an older one comes later: not written');
    assert.deepEqual(decodeState(await suite.redis.admin().hget(key, 'N-0'))?.state, { tx: 'newer' });
    assert.deepEqual(await restore(1_001, 'newest'), [1_001], 'a newer one: written');
    // A commit from nothing after the loss: its revision is Redis's clock in ms, above any from before.
    const committed = await own.commit('N-1', { tx: 'after the loss' });
    assert.ok(committed.ok);
    const before = committed.ok ? committed.rev : 0;
    assert.deepEqual(await fleet.connection.eval(RESTORE_STATES.call({ state: key, lossMark: mark, restores }, { replica: fleet.replicaId }, { args: ['N-1', String(before - 1), JSON.stringify({ tx: 'from before' })] })), [before]);
    assert.deepEqual(decodeState(await suite.redis.admin().hget(key, 'N-1'))?.state, { tx: 'after the loss' });
  });

  it('the loss mark names the members seen before the loss and is gone once each has put its states back, long before its longest life', async () => {
    const a = suite.replica();
    const b = suite.replica();
    const ownA = a.scope<{ tx: string }>('mark', {});
    const ownB = b.scope<{ tx: string }>('mark', {});
    const keys = a.keys.scope('mark');
    const admin = suite.redis.admin();
    await ownA.add(['M-1', 'M-2', 'M-3', 'M-4']);
    await until(() => ownA.replicas().length === 2 && ownB.replicas().length === 2 && ownA.owned().length + ownB.owned().length === 4, 'both members, every token owned', 5_000);
    const members = ownA.replicas();
    // MONITOR sees every command, so the mark's short life is seen whatever the timing.
    const added: string[][] = [];
    const monitor = await suite.redis.monitor((args) => {
      if (args[0]?.toLowerCase() === 'sadd' && args[1] === keys.lossMark) added.push([...new Set(args.slice(2))].sort());
    });
    try {
      await admin.flushall();
      const t0 = performance.now();
      let gone = -1;
      for (let i = 0; i < 100 && gone < 0; i++) {
        await sleep(20);
        if (added.length > 0 && (await admin.exists(keys.lossMark)) === 0) gone = performance.now() - t0;
      }
      assert.deepEqual(added, [members], 'written once, by the first replica back, with both members');
      // Its longest life is 2 s + 2 cycles (2.3 s here): gone before that means both took themselves out.
      assert.ok(gone >= 0 && gone < 2_000, `gone after ${Math.round(gone)} ms`);
    } finally {
      monitor.close();
    }
  });
});
