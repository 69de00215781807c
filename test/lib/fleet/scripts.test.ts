/**
 * Every Lua script of the fleet, called directly against a real redis-server,
 * one branch at a time (docs/fleet.md, "Scripts"): what it writes, what it
 * answers, and what it leaves alone. Then the fallback when Redis has
 * forgotten the scripts (SCRIPT FLUSH, as after a restart): EVALSHA answers
 * NOSCRIPT and the script is sent whole, once.
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { FleetKeys } from '../../../nodes/lib/fleet/redis/keys';
import { Script } from '../../../nodes/lib/fleet/redis/script';
import { FLEET_HEARTBEAT, FLEET_LEAVE, LIVE_MEMBERS } from '../../../nodes/lib/fleet/membership/membership';
import { SCOPE_HEARTBEAT, SCOPE_LEAVE } from '../../../nodes/lib/fleet/leases/scope-members';
import { LEASES } from '../../../nodes/lib/fleet/leases/lease-batch';
import { ITEM_LIST } from '../../../nodes/lib/fleet/leases/item-list';
import { COMMIT_STATE } from '../../../nodes/lib/fleet/leases/state-commit';
import { RESTORE_STATES } from '../../../nodes/lib/fleet/leases/recovery';
import { POST } from '../../../nodes/lib/fleet/leases/inbox';
import { decodeState, encodeState } from '../../../nodes/lib/fleet/leases/state-codec';
import { CLAIM, PUBLISH } from '../../../nodes/lib/fleet/claims/claim-scripts';
import { LOCK_RELEASE, TOKEN_DROP, TOKEN_READ, TOKEN_STORE } from '../../../nodes/lib/fleet/token/token-scripts';
import { BUDGET_TAKE } from '../../../nodes/lib/fleet/budget/budget';
import { GRANT_CONFIGURE, GRANT_LIST, GRANT_SET_LIMIT, GRANT_SYNC } from '../../../nodes/lib/fleet/grants/grant-scripts';
import { RedisServer, requireRedis } from '../../redis-server';

describe('fleet: each Lua script, branch by branch (real redis-server)', function () {
  this.timeout(20_000);
  let redis: RedisServer;
  let conn: FleetConnection;
  let admin: Redis;
  let keys: FleetKeys;
  let n = 0;

  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start();
    conn = new FleetConnection({ url: redis.url, connectTimeoutMs: 2_000, commandTimeoutMs: 2_000 });
    await conn.open();
    admin = redis.admin();
  });
  after(async () => {
    await conn?.close();
    await redis?.close();
  });
  beforeEach(() => {
    keys = new FleetKeys(`scripts-${process.pid}-${++n}`);
  });

  const redisMs = async () => {
    const [s, us] = await admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  describe('membership', () => {
    it('FLEET_HEARTBEAT: a member with its info stamped with Redis\'s time; an empty info kept as none; a lapsed member and its info pruned', async () => {
      const before = await redisMs();
      const res = (await conn.eval(FLEET_HEARTBEAT.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: JSON.stringify({ host: 'h', owned: 2 }) }))) as unknown[];
      const at = Number(res[0]);
      assert.ok(at >= before && at <= (await redisMs()), 'Redis\'s time in the answer');
      assert.deepEqual(res.slice(1), ['a', `{"at":${at},"host":"h","owned":2}`]);
      await conn.eval(FLEET_HEARTBEAT.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: 'b', leaseMs: 60_000, info: '' }));
      assert.equal(await admin.hget(keys.replicaInfo, 'b'), null, 'no info kept for an empty one');
      // A member whose heartbeat lapsed: pruned with its info by the next heartbeat of anyone.
      await admin.zadd(keys.replicas, before - 1, 'dead');
      await admin.hset(keys.replicaInfo, 'dead', '{}');
      const again = (await conn.eval(FLEET_HEARTBEAT.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: '{"x":1}' }))) as unknown[];
      assert.deepEqual(again.filter((_, i) => i % 2 === 1).sort(), ['a', 'b']);
      assert.equal(await admin.hget(keys.replicaInfo, 'dead'), null);
      assert.ok((await admin.pttl(keys.replicas)) > 60_000 * 19, 'the set lapses when nobody runs the fleet (20 leases)');
    });

    it('LIVE_MEMBERS: the members not lapsed on Redis\'s clock, with their info, and nothing written', async () => {
      await conn.eval(FLEET_HEARTBEAT.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: '{"owned":3}' }));
      await admin.zadd(keys.replicas, (await redisMs()) - 1, 'lapsed');
      const res = (await conn.eval(LIVE_MEMBERS.call({ replicas: keys.replicas, info: keys.replicaInfo }, {}))) as string[];
      assert.equal(res[0], 'a');
      assert.match(res[1], /^\{"at":\d+,"owned":3\}$/);
      assert.equal(res.length, 2);
      assert.deepEqual((await admin.zrange(keys.replicas, '0', '-1')).sort(), ['a', 'lapsed'], 'read only: the lapsed one is not pruned here');
    });

    it('FLEET_LEAVE: the member and its info go, nobody else', async () => {
      for (const r of ['a', 'b']) await conn.eval(FLEET_HEARTBEAT.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: r, leaseMs: 60_000, info: '{"y":2}' }));
      await conn.eval(FLEET_LEAVE.call({ replicas: keys.replicas, info: keys.replicaInfo }, { replica: 'a' }));
      assert.deepEqual(await admin.zrange(keys.replicas, '0', '-1'), ['b']);
      assert.deepEqual(Object.keys(await admin.hgetall(keys.replicaInfo)), ['b']);
    });
  });

  describe('lease scopes', () => {
    const beat = (replica: string, opts: { leave?: boolean; epochSeen?: string; markMs?: number; members?: string[] } = {}) => {
      const s = keys.scope('s');
      return conn.eval(
        SCOPE_HEARTBEAT.call(
          { members: s.members, version: s.version, epoch: s.epoch, lossMark: s.lossMark, restores: s.restores },
          { replica, leaseMs: 60_000, leave: opts.leave ? '1' : '0', epochSeen: opts.epochSeen ?? '', markMs: opts.markMs ?? 5_000 },
          { args: opts.members ?? [] },
        ),
      ) as Promise<unknown[]>;
    };

    it('SCOPE_HEARTBEAT: the first one writes the epoch and no loss mark; later ones read it; version and restores as kept; live members', async () => {
      const s = keys.scope('s');
      const first = await beat('a');
      assert.equal(first[0], null, 'no version yet');
      assert.match(String(first[1]), /^\d+\.\d+:a$/);
      assert.equal(first[2], -2, 'no loss mark');
      assert.equal(first[3], null, 'no restores yet');
      assert.deepEqual(first.slice(4), ['a']);
      await admin.set(s.version, '7');
      await admin.set(s.restores, '3');
      const second = await beat('b');
      assert.deepEqual(second.slice(0, 4), ['7', first[1], -2, '3'], 'the same epoch: no loss');
      assert.deepEqual(second.slice(4), ['a', 'b']);
    });

    it('SCOPE_HEARTBEAT: a replica that saw an epoch finds none: a new epoch and the loss mark of the members it saw, for markMs', async () => {
      const s = keys.scope('s');
      const res = await beat('a', { epochSeen: 'old-epoch', markMs: 4_000, members: ['a', 'b', 'c'] });
      assert.notEqual(res[1], 'old-epoch');
      assert.deepEqual((await admin.smembers(s.lossMark)).sort(), ['a', 'b', 'c']);
      const left = Number(res[2]);
      assert.ok(left > 3_000 && left <= 4_000, `the mark lives markMs (${left})`);
      // The next one back, having seen the old epoch too, finds the new one written: no second mark.
      await admin.srem(s.lossMark, 'b');
      const next = await beat('b', { epochSeen: 'old-epoch', members: ['x'] });
      assert.equal(next[1], res[1]);
      assert.deepEqual((await admin.smembers(s.lossMark)).sort(), ['a', 'c']);
    });

    it('SCOPE_HEARTBEAT: standing down takes the replica out of the members but still reads the scope; a lapsed member is pruned', async () => {
      const s = keys.scope('s');
      await beat('a');
      await beat('b');
      await admin.zadd(s.members, 1, 'dead');
      const res = await beat('a', { leave: true });
      assert.deepEqual(res.slice(4), ['b']);
      assert.deepEqual(await admin.zrange(s.members, '0', '-1'), ['b']);
    });

    it('SCOPE_LEAVE: only that member', async () => {
      const s = keys.scope('s');
      await beat('a');
      await beat('b');
      assert.equal(await conn.eval(SCOPE_LEAVE.call({ members: s.members }, { replica: 'a' })), 1);
      assert.deepEqual(await admin.zrange(s.members, '0', '-1'), ['b']);
    });

    it('LEASES: a free lease taken (2), ours renewed (1), another\'s left (0); given back only when ours', async () => {
      const s = keys.scope('s');
      const [free, mine, theirs, giveMine, giveTheirs] = ['free', 'mine', 'theirs', 'give-mine', 'give-theirs'].map((t) => s.lease(t));
      await admin.set(mine, 'me', 'PX', 1_000);
      await admin.set(theirs, 'other', 'PX', 60_000);
      await admin.set(giveMine, 'me', 'PX', 60_000);
      await admin.set(giveTheirs, 'other', 'PX', 60_000);
      const res = await conn.eval(LEASES.call({}, { replica: 'me', leaseMs: 30_000, wanted: 3 }, { keys: [free, mine, theirs, giveMine, giveTheirs] }));
      assert.deepEqual(res, [2, 1, 0, 0, 0]);
      assert.equal(await admin.get(free), 'me');
      assert.ok((await admin.pttl(mine)) > 20_000, 'renewed for the lease time');
      assert.equal(await admin.get(theirs), 'other');
      assert.equal(await admin.get(giveMine), null, 'ours given back');
      assert.equal(await admin.get(giveTheirs), 'other', 'another\'s (taken after ours lapsed) left alone');
    });

    it('ITEM_LIST: the version moves when the list changes (or when there is none); a removed item\'s state goes with it', async () => {
      const s = keys.scope('s');
      const list = (op: '+' | '-', ...items: string[]) => conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op }, { args: items }));
      assert.equal(await list('+', 'A', 'B'), 1);
      assert.equal(await list('+', 'A'), 1, 'nothing new: the same version');
      await admin.del(s.version);
      assert.equal(await list('+', 'A'), 1, 'no version: one is written');
      await admin.hset(s.state, 'A', '5::{}', 'B', '6::{}');
      assert.equal(await list('-', 'A', 'Z'), 2);
      assert.deepEqual(await admin.smembers(s.list), ['B']);
      assert.deepEqual(await admin.hkeys(s.state), ['B']);
      assert.equal(await list('-', 'Z'), 2, 'nothing removed: the same version');
    });

    describe('COMMIT_STATE', () => {
      const s = () => keys.scope('s');
      const commit = (item: string, expectedRev: number, json: string, commitId: string, opts: { replica?: string; heldByClock?: boolean } = {}) =>
        conn.eval(COMMIT_STATE.call({ lease: s().lease(item), state: s().state }, { replica: opts.replica ?? 'me', item, expectedRev, json, commitId, heldByClock: opts.heldByClock ? '1' : '0' }));
      const id = (c: string) => c.repeat(16);

      it('from nothing by the holder: the revision is Redis\'s clock; then +1 per commit; the last 8 ids kept, newest first', async () => {
        await admin.set(s().lease('T'), 'me');
        const before = await redisMs();
        const rev = Number(await commit('T', 0, '{"n":1}', id('a')));
        assert.ok(rev >= before && rev <= (await redisMs()), 'a revision from Redis\'s clock');
        const ids = 'bcdefghij'.split('').map((c) => id(c.replace(/[g-j]/, (x) => String(x.charCodeAt(0) - 100))));
        let r = rev;
        for (const c of ids) r = Number(await commit('T', r, '{"n":2}', c));
        assert.equal(r, rev + ids.length);
        const raw = String(await admin.hget(s().state, 'T'));
        assert.equal(raw, encodeState(r, [...ids].reverse().slice(0, 8), { n: 2 }));
        assert.deepEqual(decodeState(raw), { rev: r, state: { n: 2 } });
      });

      it('a retry of an applied commit: answered with its revision; the newest one refreshes the state, an older one writes nothing', async () => {
        await admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        const r2 = Number(await commit('T', r1, '{"n":2}', id('b')));
        assert.equal(await commit('T', r1, '{"n":22}', id('b')), r2, 'the newest retried: its revision');
        assert.deepEqual(decodeState(await admin.hget(s().state, 'T')), { rev: r2, state: { n: 22 } }, 'and its state refreshed');
        assert.equal(await commit('T', 0, '{"n":11}', id('a')), r2, 'an older one retried: the current revision');
        assert.deepEqual(decodeState(await admin.hget(s().state, 'T')), { rev: r2, state: { n: 22 } }, 'nothing written');
      });

      it('another replica\'s lease: -1; a stale revision of ours: {-2, current}', async () => {
        await admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        assert.deepEqual(await commit('T', r1 - 1, '{"n":2}', id('b')), [-2, r1]);
        await admin.set(s().lease('T'), 'other');
        assert.equal(await commit('T', r1, '{"n":2}', id('c')), -1);
        assert.equal(await commit('T', r1, '{"n":2}', id('c'), { heldByClock: true }), -1, 'held by another: no matter our clock');
      });

      it('a free lease: refused unless the caller still holds the item by its own clock and expects the revision there', async () => {
        await admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        await admin.del(s().lease('T'));
        assert.equal(await commit('T', r1, '{"n":2}', id('b')), -1, 'its own clock says it lapsed');
        assert.equal(await commit('T', r1 - 1, '{"n":2}', id('b'), { heldByClock: true }), -1, 'another revision expected: refused, not stale');
        assert.equal(await commit('T', r1, '{"n":2}', id('b'), { heldByClock: true }), r1 + 1);
      });

      it('reads a state in the format kept before commit ids, and a tombstone', async () => {
        await admin.set(s().lease('T'), 'me');
        await admin.hset(s().state, 'T', '41:{"n":0}');
        assert.equal(await commit('T', 41, '', id('a')), 42);
        assert.equal(await admin.hget(s().state, 'T'), `42:${id('a')}:`);
        assert.deepEqual(decodeState(await admin.hget(s().state, 'T')), { rev: 42, state: null });
      });
    });

    it('RESTORE_STATES: over an older state or none only, in the codec\'s format; the replica leaves the mark; a restore that wrote is counted', async () => {
      const s = keys.scope('s');
      await admin.hset(s.state, 'OLD', encodeState(5, ['a'.repeat(16)], { v: 'old' }), 'NEW', encodeState(9, [], { v: 'new' }));
      await admin.sadd(s.lossMark, 'me', 'other');
      const restore = (...triples: string[]) => conn.eval(RESTORE_STATES.call({ state: s.state, lossMark: s.lossMark, restores: s.restores }, { replica: 'me' }, { args: triples }));
      assert.deepEqual(await restore('OLD', '7', '{"v":"mine"}', 'NEW', '8', '{"v":"mine"}', 'NONE', '3', ''), [7, 9, 3]);
      assert.equal(await admin.hget(s.state, 'OLD'), '7::{"v":"mine"}');
      assert.deepEqual(decodeState(await admin.hget(s.state, 'NEW')), { rev: 9, state: { v: 'new' } }, 'a newer state is never overwritten');
      assert.deepEqual(decodeState(await admin.hget(s.state, 'NONE')), { rev: 3, state: null });
      assert.deepEqual(await admin.smembers(s.lossMark), ['other']);
      assert.equal(await admin.get(s.restores), '1');
      assert.deepEqual(await restore('NEW', '2', '{}'), [9]);
      assert.equal(await admin.get(s.restores), '1', 'a restore that wrote nothing is not counted');
    });

    it('POST: each message under the next number; the newest per item kept', async () => {
      const inbox = keys.scope('s', 'node').inbox;
      assert.equal(await conn.eval(POST.call({ inbox }, { item: 'A', text: '{"wanted":true}' })), 1);
      assert.equal(await conn.eval(POST.call({ inbox }, { item: 'B', text: 'x' })), 2);
      assert.equal(await conn.eval(POST.call({ inbox }, { item: 'A', text: '{"wanted":false}' })), 3);
      assert.deepEqual(await admin.hgetall(inbox), { '#seq': '3', A: '3:{"wanted":false}', B: '2:x' });
    });
  });

  describe('claims', () => {
    const claimArgs = (claimant: string, o: { sinceFirstMs?: number; firstAtLeastMs?: number; windowMs?: number; takeOver?: boolean; minAgeMs?: number; claimMs?: number } = {}) => ({
      claimant,
      claimMs: o.claimMs ?? 10_000,
      sinceFirstMs: o.sinceFirstMs ?? 0,
      firstAtLeastMs: o.firstAtLeastMs ?? '',
      windowMs: o.windowMs ?? 2_000,
      takeOver: o.takeOver ? '1' : '0',
      minAgeMs: o.minAgeMs ?? 0,
    });
    const claim = (key: string, claimant: string, o = {}) => conn.eval(CLAIM.call({ claim: key, replicas: keys.replicas }, claimArgs(claimant, o)));
    const live = async (replica: string, forMs: number) => admin.zadd(keys.replicas, (await redisMs()) + forMs, replica);

    it('CLAIM: a free key is claimed; a live claimer\'s claim is answered with 1; a gone claimer\'s with 0 (no takeover asked, or the claim too young)', async () => {
      const key = keys.claim('c1');
      assert.equal(await claim(key, 'x1:alive'), 'OK');
      assert.equal(await admin.get(key), 'x1:alive\n');
      await live('alive', 60_000);
      assert.deepEqual(await claim(key, 'x2:other', { takeOver: true }), ['x1:alive\n', 1]);
      await admin.zrem(keys.replicas, 'alive');
      assert.deepEqual(await claim(key, 'x2:other'), ['x1:alive\n', 0], 'no takeover asked');
      assert.deepEqual(await claim(key, 'x2:other', { takeOver: true, minAgeMs: 5_000 }), ['x1:alive\n', 0], 'too young to take over');
    });

    it('CLAIM: a gone claimer\'s claim old enough is taken over when asked', async () => {
      const key = keys.claim('c2');
      assert.equal(await claim(key, 'x1:dead', { claimMs: 10_000 }), 'OK');
      await new Promise((r) => setTimeout(r, 120));
      assert.equal(await claim(key, 'x2:live', { takeOver: true, minAgeMs: 100, claimMs: 10_000 }), 'OK');
      assert.equal(await admin.get(key), 'x2:live\n');
    });

    it('CLAIM: a published outcome answers within its window (1); past the window from the first try, the key is claimed anew', async () => {
      const key = keys.claim('c3');
      await claim(key, 'x1:a');
      assert.equal(await conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{"ok":true,"result":1}', keepMs: 10_000 })), 1);
      const held = String(await admin.get(key));
      assert.match(held, /^x1:a\n\d+ \{"ok":true,"result":1\}$/);
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 2_000 }), [held, 1]);
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 2_000, sinceFirstMs: 1_000 }), [held, 1], 'first tried within the window: still the same work');
      assert.equal(await claim(key, 'x2:b', { windowMs: 0 }), 'OK', 'past the window: new work');
    });

    it('CLAIM: a script that ran late (held in Redis by a write pause) places the first try by the caller\'s reading of Redis\'s clock, the earlier of the two', async () => {
      const key = keys.claim('c5');
      await claim(key, 'x1:a');
      await conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{"ok":true,"result":1}', keepMs: 10_000 }));
      const held = String(await admin.get(key));
      const publishedAt = Number(/\n(\d+) /.exec(held)?.[1]);
      await new Promise((r) => setTimeout(r, 150));
      // Sent with 0 ms since the first try, run 150 ms after the outcome: past a window of 100 ms by what sinceFirstMs says.
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 100, firstAtLeastMs: publishedAt + 50 }), [held, 1], 'first tried 50 ms after the outcome on Redis\'s clock: the same work');
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 100, firstAtLeastMs: (await redisMs()) + 60_000 }), 'OK', 'a later reading never makes it the same work: new work');
    });

    it('PUBLISH: only under the caller\'s own claim', async () => {
      const key = keys.claim('c4');
      assert.equal(await conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{}', keepMs: 1_000 })), 0, 'no claim');
      await claim(key, 'x1:a');
      assert.equal(await conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x9:z', outcome: '{}', keepMs: 1_000 })), 0, 'another\'s claim');
      assert.equal(await admin.get(key), 'x1:a\n');
    });
  });

  describe('token', () => {
    it('TOKEN_READ, TOKEN_STORE, TOKEN_DROP, LOCK_RELEASE: none read as none; stored with its lifetime and our lock freed (another\'s kept); dropped only when it is the one given', async () => {
      const token = keys.token('acct');
      const lock = keys.tokenLock('acct');
      assert.deepEqual(await conn.eval(TOKEN_READ.call({ token }, {})), []);
      await admin.set(lock, 'someone-else');
      await conn.eval(TOKEN_STORE.call({ token, lock }, { sealed: 'S1', lifetimeMs: 1_800_000, keepMs: 60_000, lockId: 'me' }));
      assert.equal(await admin.get(lock), 'someone-else', 'another\'s lock is not ours to free');
      const [v, l, left] = (await conn.eval(TOKEN_READ.call({ token }, {}))) as [string, string, number];
      assert.deepEqual([v, l], ['S1', '1800000']);
      assert.ok(left > 50_000 && left <= 60_000);
      await admin.set(lock, 'me');
      await conn.eval(TOKEN_STORE.call({ token, lock }, { sealed: 'S2', lifetimeMs: 1_000, keepMs: 60_000, lockId: 'me' }));
      assert.equal(await admin.get(lock), null, 'our lock freed');
      assert.equal(await conn.eval(TOKEN_DROP.call({ token }, { sealed: 'S1' })), 0, 'not the one stored now');
      assert.equal(await conn.eval(TOKEN_DROP.call({ token }, { sealed: 'S2' })), 1);
      assert.equal(await admin.exists(token), 0);
      await admin.set(lock, 'other');
      assert.equal(await conn.eval(LOCK_RELEASE.call({ lock }, { lockId: 'me' })), 0);
      assert.equal(await conn.eval(LOCK_RELEASE.call({ lock }, { lockId: 'other' })), 1);
    });
  });

  describe('budget', () => {
    it('BUDGET_TAKE: the next free start reserved when close enough, spaced on Redis\'s clock; nothing reserved beyond the wait allowed', async () => {
      const take = (maxWaitUs: number) => conn.eval(BUDGET_TAKE.call({ budget: keys.budget }, { spacingUs: 500_000, keepMs: 5_000, maxWaitUs })) as Promise<number[]>;
      const first = await take(0);
      assert.equal(first[0], 1);
      assert.equal(first[2], 0, 'now');
      const second = await take(1_000_000);
      assert.equal(second[0], 1);
      assert.equal(second[1], first[1] + 500_000, 'half a second after the first, on Redis\'s clock');
      const refused = await take(0);
      assert.equal(refused[0], 0);
      assert.ok(refused[1] > 500_000 && refused[1] <= 1_000_000, `the wait until the next free start (${refused[1]} µs)`);
      assert.equal(Number(await admin.get(keys.budget)), second[1] + 500_000, 'a refused take reserves nothing');
    });
  });

  describe('grants', () => {
    const pool = () => {
      const k = keys.grants('depot');
      return { keys: { entries: k.entries, queue: k.queue, holders: k.holders, waitExpiry: k.waitExpiry, lapses: k.lapses, rules: k.rules }, k };
    };
    const args = (o: { epochSeen?: string; limit?: number | '' } = {}) => ({ confLimit: o.limit ?? 1, confBudget: '', agingMs: 0, epochSeen: o.epochSeen ?? '', recountMs: 60_000, offsetMs: 0 });
    const sync = async (key: string, op: string, o: { epochSeen?: string; create?: string } = {}) =>
      JSON.parse(String(await conn.eval(GRANT_SYNC.call(pool().keys, { ...args(o), key, op, priority: 0, weight: 11, waitMs: 60_000, lapseMs: 600_000, note: '{"state":"x"}', requeue: '0', create: o.create ?? '', maxEntries: 10 })))) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

    it('GRANT_SYNC: a first ask on a new pool puts the configured rules and grants; a second waits at 1; hold, look and release as the pool says; each answer its table and version', async () => {
      const a = await sync('A', 'ask');
      assert.equal(a.granted, true);
      assert.equal(a.table.limit, 1);
      assert.equal(a.entry.note.state, 'x');
      const b = await sync('B', 'ask');
      assert.deepEqual([b.granted, b.position, b.table.waiting, b.table.inUse], [false, 1, 1, 1]);
      assert.deepEqual(b.table.holders.map((h: { key: string }) => h.key), ['A'], 'someone waits: every holder in the answer');
      assert.ok(b.version > a.version, 'a change any replica shows moves the version');
      const look = await sync('B', 'look');
      assert.equal(look.version, b.version, 'a renewal alone does not');
      const s = await sync('S', 'hold', { create: '{"station":true}' });
      assert.deepEqual([s.entry.state, s.table.inUse, s.entry.note.station], ['granted', 2, true]);
      assert.notEqual(s.table.overSince, null, 'over the limit: a station session counts');
      const r = await sync('A', 'release');
      assert.deepEqual([r.entry, r.mayAdmit, r.table.inUse], [null, true, 1]);
      assert.deepEqual(JSON.parse(String(await admin.hget(pool().k.entries, 'B'))).state, 'waiting', 'over the limit still: nobody let in');
    });

    it('GRANT_SYNC: a pool Redis lost, asked by a replica that had seen it: nobody new until the re-count is over; one that had not: at once', async () => {
      const fresh = await sync('A', 'ask', { epochSeen: '' });
      assert.equal(fresh.granted, true, 'a new pool: no re-count');
      await admin.del(...Object.values(pool().keys));
      const lost = await sync('B', 'ask', { epochSeen: String(fresh.epoch) });
      assert.equal(lost.granted, false, 'a pool lost: the cars still charging are counted again first');
      assert.ok(Number(await admin.hget(pool().k.rules, 'recountUntil')) > Date.now());
    });

    it('GRANT_CONFIGURE, GRANT_SET_LIMIT, GRANT_LIST: the configured rules (a run-time limit kept until the configured one changes), the limit at run time, every entry', async () => {
      await conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 1 })));
      await sync('A', 'ask');
      await sync('B', 'ask');
      const set = JSON.parse(String(await conn.eval(GRANT_SET_LIMIT.call(pool().keys, { ...args({ limit: 1 }), limit: 3, budgetKW: '' }))));
      assert.equal(set.table.limit, 3);
      await conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 1 })));
      assert.equal(Number(await admin.hget(pool().k.rules, 'limit')), 3, 'the same configuration: the run-time limit stays');
      await conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 2 })));
      const list = JSON.parse(String(await conn.eval(GRANT_LIST.call(pool().keys, args({ limit: 2 })))));
      assert.equal(list.table.limit, 2, 'the configuration changed: it wins');
      assert.deepEqual([list.table.holders.length + (Array.isArray(list.queue) ? list.queue.length : 0)], [2]);
    });
  });

  describe('the codec, in TypeScript and in Lua', () => {
    it('reads what the other writes: ids or none, a state or a tombstone, and the format kept before ids', async () => {
      const read = new Script({ name: 'codecRead', keys: [], args: ['raw'], lua: `${(await import('../../../nodes/lib/fleet/leases/state-codec')).STATE_CODEC_LUA}\nlocal rev, ids, json = decodeState(A.raw)\nreturn { rev, ids, json }` });
      for (const [raw, expected] of [
        [encodeState(12, ['a'.repeat(16), 'b'.repeat(16)], { x: ':{}' }), [12, `${'a'.repeat(16)},${'b'.repeat(16)}`, '{"x":":{}"}']],
        [encodeState(3, [], null), [3, '', '']],
        ['41:{"n":0}', [41, '', '{"n":0}']],
        ['41:', [41, '', '']],
      ] as Array<[string, [number, string, string]]>) {
        assert.deepEqual(await conn.eval(read.call({}, { raw })), expected, raw);
        const ts = decodeState(raw);
        assert.equal(ts?.rev, expected[0]);
        assert.deepEqual(ts?.state ?? null, expected[2] === '' ? null : JSON.parse(expected[2]));
      }
    });
  });

  describe('when Redis has forgotten the scripts', () => {
    it('EVALSHA answers NOSCRIPT: the script is sent whole once, answers as before, and is known again', async () => {
      const s = keys.scope('s');
      const call = ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['A'] });
      assert.equal(await conn.eval(call), 1);
      assert.deepEqual(await admin.script('EXISTS', ITEM_LIST.sha), [1]);
      await admin.script('FLUSH');
      assert.deepEqual(await admin.script('EXISTS', ITEM_LIST.sha), [0]);
      const seen: string[] = [];
      const monitor = await redis.monitor((args) => seen.push(args[0].toLowerCase()));
      try {
        assert.equal(await conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['B'] })), 2);
        assert.equal(await conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['C'] })), 3);
        await admin.echo('done');
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        await monitor.close();
      }
      assert.deepEqual(seen.filter((c) => c === 'evalsha' || c === 'eval'), ['evalsha', 'eval', 'evalsha'], 'NOSCRIPT, then the text once, then by its SHA again');
      assert.deepEqual(await admin.script('EXISTS', ITEM_LIST.sha), [1]);
    });
  });
});
