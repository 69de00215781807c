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
import { parseSaved } from '../../../nodes/lib/fleet/saved-state';
import { Fleet } from '../../../nodes/lib/fleet/fleet';
import { RedisServer } from '../../redis-server';
import { fleetSuite, sleep, FAST } from './fleet-fixture';

describe('fleet: Redis lost its data under a replica that keeps its lease', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('the holder commits its next state from nothing: ok, not stale, and the token stays held', async () => {
    const fleet = suite.replica();
    const own = fleet.ownership<{ tx: string }>('loss', {});
    await own.watch(['LOSS-T']);
    await until(() => own.mayPoll('LOSS-T'), 'the lease taken', 5_000);
    const first = await own.commit('LOSS-T', { tx: 'TX-1' });
    assert.ok(first.ok, JSON.stringify(first));
    assert.deepEqual(await own.commit('LOSS-T', { tx: 'TX-1' }), { ok: true, rev: (first.ok ? first.rev : 0) + 1 });
    await suite.redis.admin().flushall();
    await sleep(3 * FAST.cycleMs); // the lease is taken again (the key is free), the list put back
    assert.ok(own.mayPoll('LOSS-T'), 'still held');
    const ended = await own.commit('LOSS-T', null);
    assert.equal(ended.ok, true, `the session's end is committed: ${JSON.stringify(ended)}`);
    assert.ok(own.mayPoll('LOSS-T'), 'still held after the commit');
  });

  it('the holder puts its states back as soon as it sees the loss, so that the next holder resumes from them, and commits on from there', async () => {
    const fleet = suite.replica();
    const own = fleet.ownership<{ tx: string }>('restore', {});
    const keys = fleet.keys.scope('restore');
    const admin = suite.redis.admin();
    await own.watch(['R-1', 'R-2']);
    await until(() => own.mayPoll('R-1') && own.mayPoll('R-2'), 'both leases taken', 5_000);
    assert.ok((await own.commit('R-1', { tx: 'TX-1' })).ok);
    assert.ok((await own.commit('R-2', null)).ok);
    await admin.flushall();
    for (let i = 0; i < 50 && (await admin.hget(keys.state, 'R-1')) === null; i++) await sleep(100);
    assert.deepEqual(parseSaved(await admin.hget(keys.state, 'R-1'))?.state, { tx: 'TX-1' }, 'a session seen: the next holder must not take it for new');
    assert.deepEqual(parseSaved(await admin.hget(keys.state, 'R-2'))?.state, null, 'no session: kept as such');
    await until(() => own.mayPoll('R-1'), 'the lease held again', 5_000);
    const next = await own.commit('R-1', { tx: 'TX-2' });
    assert.equal(next.ok, true, `the next commit follows the state put back: ${JSON.stringify(next)}`);
  });

  it('a lease that lapsed while Redis was away: its state is put back too when Redis comes back without its data', async () => {
    const redis = await RedisServer.start({ persist: false });
    const fleet = new Fleet({ url: redis.url, fleetKey: `lapsed-${process.pid}`, ...FAST });
    try {
      const own = fleet.ownership<{ tx: string }>('lapsed', {});
      await own.watch(['L-1']);
      await until(() => own.mayPoll('L-1'), 'the lease taken', 5_000);
      assert.ok((await own.commit('L-1', { tx: 'TX-1' })).ok);
      await redis.stop();
      await until(() => !own.mayPoll('L-1'), 'the lease lapsed locally', 5_000);
      await redis.start();
      const admin = redis.admin();
      const key = fleet.keys.scope('lapsed').state;
      for (let i = 0; i < 60 && (await admin.hget(key, 'L-1').catch(() => null)) === null; i++) await sleep(100);
      assert.deepEqual(parseSaved(await admin.hget(key, 'L-1'))?.state, { tx: 'TX-1' }, 'the last holder put back the state of the lease it lost while Redis was away');
    } finally {
      await fleet.close();
      await redis.close();
    }
  });
});
