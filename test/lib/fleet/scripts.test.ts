/**
 * Every Lua script of the fleet, called directly against a real redis-server,
 * one branch at a time (docs/fleet.md, "Scripts"): what it writes, what it
 * answers, and what it leaves alone. Then the fallback when Redis has
 * forgotten the scripts (SCRIPT FLUSH, as after a restart): EVALSHA answers
 * NOSCRIPT and the script is sent whole, once.
 */
import assert from 'node:assert/strict';
import { Script } from '../../../nodes/lib/fleet/redis/script';
import { FLEET_HEARTBEAT, FLEET_LEAVE, LIVE_MEMBERS } from '../../../nodes/lib/fleet/membership/membership';
import { decodeState, encodeState } from '../../../nodes/lib/fleet/leases/state-codec';
import { ITEM_LIST } from '../../../nodes/lib/fleet/leases/item-list';
import { CLAIM, PUBLISH } from '../../../nodes/lib/fleet/claims/claim-scripts';
import { LOCK_RELEASE, TOKEN_DROP, TOKEN_READ, TOKEN_STORE } from '../../../nodes/lib/fleet/token/token-scripts';
import { BUDGET_TAKE } from '../../../nodes/lib/fleet/budget/budget';
import { GRANT_CONFIGURE, GRANT_LIST, GRANT_SET_LIMIT, GRANT_SYNC } from '../../../nodes/lib/fleet/grants/grant-scripts';
import { scriptSuite } from './script-fixture';

describe('fleet: each Lua script, branch by branch (real redis-server)', function () {
  this.timeout(20_000);
  const rs = scriptSuite();

  describe('membership', () => {
    it('FLEET_HEARTBEAT: a member with its info stamped with Redis\'s time; an empty info kept as none; a lapsed member and its info pruned', async () => {
      const before = await rs.redisMs();
      const res = (await rs.conn.eval(FLEET_HEARTBEAT.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: JSON.stringify({ host: 'h', owned: 2 }) }))) as unknown[];
      const at = Number(res[0]);
      assert.ok(at >= before && at <= (await rs.redisMs()), 'Redis\'s time in the answer');
      assert.deepEqual(res.slice(1), ['a', `{"at":${at},"host":"h","owned":2}`]);
      await rs.conn.eval(FLEET_HEARTBEAT.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: 'b', leaseMs: 60_000, info: '' }));
      assert.equal(await rs.admin.hget(rs.keys.replicaInfo, 'b'), null, 'no info kept for an empty one');
      // A member whose heartbeat lapsed: pruned with its info by the next heartbeat of anyone.
      await rs.admin.zadd(rs.keys.replicas, before - 1, 'dead');
      await rs.admin.hset(rs.keys.replicaInfo, 'dead', '{}');
      const again = (await rs.conn.eval(FLEET_HEARTBEAT.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: '{"x":1}' }))) as unknown[];
      assert.deepEqual(again.filter((_, i) => i % 2 === 1).sort(), ['a', 'b']);
      assert.equal(await rs.admin.hget(rs.keys.replicaInfo, 'dead'), null);
      assert.ok((await rs.admin.pttl(rs.keys.replicas)) > 60_000 * 19, 'the set lapses when nobody runs the fleet (20 leases)');
    });

    it('LIVE_MEMBERS: the members not lapsed on Redis\'s clock, with their info, and nothing written', async () => {
      await rs.conn.eval(FLEET_HEARTBEAT.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: 'a', leaseMs: 60_000, info: '{"owned":3}' }));
      await rs.admin.zadd(rs.keys.replicas, (await rs.redisMs()) - 1, 'lapsed');
      const res = (await rs.conn.eval(LIVE_MEMBERS.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, {}))) as string[];
      assert.equal(res[0], 'a');
      assert.match(res[1], /^\{"at":\d+,"owned":3\}$/);
      assert.equal(res.length, 2);
      assert.deepEqual((await rs.admin.zrange(rs.keys.replicas, '0', '-1')).sort(), ['a', 'lapsed'], 'read only: the lapsed one is not pruned here');
    });

    it('FLEET_LEAVE: the member and its info go, nobody else', async () => {
      for (const r of ['a', 'b']) await rs.conn.eval(FLEET_HEARTBEAT.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: r, leaseMs: 60_000, info: '{"y":2}' }));
      await rs.conn.eval(FLEET_LEAVE.call({ replicas: rs.keys.replicas, info: rs.keys.replicaInfo }, { replica: 'a' }));
      assert.deepEqual(await rs.admin.zrange(rs.keys.replicas, '0', '-1'), ['b']);
      assert.deepEqual(Object.keys(await rs.admin.hgetall(rs.keys.replicaInfo)), ['b']);
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
    const claim = (key: string, claimant: string, o = {}) => rs.conn.eval(CLAIM.call({ claim: key, replicas: rs.keys.replicas }, claimArgs(claimant, o)));
    const live = async (replica: string, forMs: number) => rs.admin.zadd(rs.keys.replicas, (await rs.redisMs()) + forMs, replica);

    it('CLAIM: a free key is claimed; a live claimer\'s claim is answered with 1; a gone claimer\'s with 0 (no takeover asked, or the claim too young)', async () => {
      const key = rs.keys.claim('c1');
      assert.equal(await claim(key, 'x1:alive'), 'OK');
      assert.equal(await rs.admin.get(key), 'x1:alive\n');
      await live('alive', 60_000);
      assert.deepEqual(await claim(key, 'x2:other', { takeOver: true }), ['x1:alive\n', 1]);
      await rs.admin.zrem(rs.keys.replicas, 'alive');
      assert.deepEqual(await claim(key, 'x2:other'), ['x1:alive\n', 0], 'no takeover asked');
      assert.deepEqual(await claim(key, 'x2:other', { takeOver: true, minAgeMs: 5_000 }), ['x1:alive\n', 0], 'too young to take over');
    });

    it('CLAIM: a gone claimer\'s claim old enough is taken over when asked', async () => {
      const key = rs.keys.claim('c2');
      assert.equal(await claim(key, 'x1:dead', { claimMs: 10_000 }), 'OK');
      await new Promise((r) => setTimeout(r, 120));
      assert.equal(await claim(key, 'x2:live', { takeOver: true, minAgeMs: 100, claimMs: 10_000 }), 'OK');
      assert.equal(await rs.admin.get(key), 'x2:live\n');
    });

    it('CLAIM: a published outcome answers within its window (1); past the window from the first try, the key is claimed anew', async () => {
      const key = rs.keys.claim('c3');
      await claim(key, 'x1:a');
      assert.equal(await rs.conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{"ok":true,"result":1}', keepMs: 10_000 })), 1);
      const held = String(await rs.admin.get(key));
      assert.match(held, /^x1:a\n\d+ \{"ok":true,"result":1\}$/);
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 2_000 }), [held, 1]);
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 2_000, sinceFirstMs: 1_000 }), [held, 1], 'first tried within the window: still the same work');
      assert.equal(await claim(key, 'x2:b', { windowMs: 0 }), 'OK', 'past the window: new work');
    });

    it('CLAIM: a script that ran late (held in Redis by a write pause) places the first try by the caller\'s reading of Redis\'s clock, the earlier of the two', async () => {
      const key = rs.keys.claim('c5');
      await claim(key, 'x1:a');
      await rs.conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{"ok":true,"result":1}', keepMs: 10_000 }));
      const held = String(await rs.admin.get(key));
      const publishedAt = Number(/\n(\d+) /.exec(held)?.[1]);
      await new Promise((r) => setTimeout(r, 150));
      // Sent with 0 ms since the first try, run 150 ms after the outcome: past a window of 100 ms by what sinceFirstMs says.
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 100, firstAtLeastMs: publishedAt + 50 }), [held, 1], 'first tried 50 ms after the outcome on Redis\'s clock: the same work');
      assert.deepEqual(await claim(key, 'x2:b', { windowMs: 100, firstAtLeastMs: (await rs.redisMs()) + 60_000 }), 'OK', 'a later reading never makes it the same work: new work');
    });

    it('PUBLISH: only under the caller\'s own claim', async () => {
      const key = rs.keys.claim('c4');
      assert.equal(await rs.conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x1:a', outcome: '{}', keepMs: 1_000 })), 0, 'no claim');
      await claim(key, 'x1:a');
      assert.equal(await rs.conn.eval(PUBLISH.call({ claim: key }, { claimant: 'x9:z', outcome: '{}', keepMs: 1_000 })), 0, 'another\'s claim');
      assert.equal(await rs.admin.get(key), 'x1:a\n');
    });
  });

  describe('token', () => {
    it('TOKEN_READ, TOKEN_STORE, TOKEN_DROP, LOCK_RELEASE: none read as none; stored with its lifetime and our lock freed (another\'s kept); dropped only when it is the one given', async () => {
      const token = rs.keys.token('acct');
      const lock = rs.keys.tokenLock('acct');
      assert.deepEqual(await rs.conn.eval(TOKEN_READ.call({ token }, {})), []);
      await rs.admin.set(lock, 'someone-else');
      await rs.conn.eval(TOKEN_STORE.call({ token, lock }, { sealed: 'S1', lifetimeMs: 1_800_000, keepMs: 60_000, lockId: 'me' }));
      assert.equal(await rs.admin.get(lock), 'someone-else', 'another\'s lock is not ours to free');
      const [v, l, left] = (await rs.conn.eval(TOKEN_READ.call({ token }, {}))) as [string, string, number];
      assert.deepEqual([v, l], ['S1', '1800000']);
      assert.ok(left > 50_000 && left <= 60_000);
      await rs.admin.set(lock, 'me');
      await rs.conn.eval(TOKEN_STORE.call({ token, lock }, { sealed: 'S2', lifetimeMs: 1_000, keepMs: 60_000, lockId: 'me' }));
      assert.equal(await rs.admin.get(lock), null, 'our lock freed');
      assert.equal(await rs.conn.eval(TOKEN_DROP.call({ token }, { sealed: 'S1' })), 0, 'not the one stored now');
      assert.equal(await rs.conn.eval(TOKEN_DROP.call({ token }, { sealed: 'S2' })), 1);
      assert.equal(await rs.admin.exists(token), 0);
      await rs.admin.set(lock, 'other');
      assert.equal(await rs.conn.eval(LOCK_RELEASE.call({ lock }, { lockId: 'me' })), 0);
      assert.equal(await rs.conn.eval(LOCK_RELEASE.call({ lock }, { lockId: 'other' })), 1);
    });
  });

  describe('budget', () => {
    it('BUDGET_TAKE: the next free start reserved when close enough, spaced on Redis\'s clock; nothing reserved beyond the wait allowed', async () => {
      const take = (maxWaitUs: number) => rs.conn.eval(BUDGET_TAKE.call({ budget: rs.keys.budget }, { spacingUs: 500_000, keepMs: 5_000, maxWaitUs })) as Promise<number[]>;
      const first = await take(0);
      assert.equal(first[0], 1);
      assert.equal(first[2], 0, 'now');
      const second = await take(1_000_000);
      assert.equal(second[0], 1);
      assert.equal(second[1], first[1] + 500_000, 'half a second after the first, on Redis\'s clock');
      const refused = await take(0);
      assert.equal(refused[0], 0);
      assert.ok(refused[1] > 500_000 && refused[1] <= 1_000_000, `the wait until the next free start (${refused[1]} µs)`);
      assert.equal(Number(await rs.admin.get(rs.keys.budget)), second[1] + 500_000, 'a refused take reserves nothing');
    });
  });

  describe('grants', () => {
    const pool = () => {
      const k = rs.keys.grants('depot');
      return { keys: { entries: k.entries, queue: k.queue, holders: k.holders, waitExpiry: k.waitExpiry, lapses: k.lapses, rules: k.rules }, k };
    };
    const args = (o: { epochSeen?: string; limit?: number | '' } = {}) => ({ confLimit: o.limit ?? 1, confBudget: '', agingMs: 0, epochSeen: o.epochSeen ?? '', recountMs: 60_000, offsetMs: 0 });
    const sync = async (key: string, op: string, o: { epochSeen?: string; create?: string } = {}) =>
      JSON.parse(String(await rs.conn.eval(GRANT_SYNC.call(pool().keys, { ...args(o), key, op, priority: 0, weight: 11, waitMs: 60_000, lapseMs: 600_000, note: '{"state":"x"}', requeue: '0', create: o.create ?? '', maxEntries: 10 })))) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

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
      assert.deepEqual(JSON.parse(String(await rs.admin.hget(pool().k.entries, 'B'))).state, 'waiting', 'over the limit still: nobody let in');
    });

    it('GRANT_SYNC: a pool Redis lost, asked by a replica that had seen it: nobody new until the re-count is over; one that had not: at once', async () => {
      const fresh = await sync('A', 'ask', { epochSeen: '' });
      assert.equal(fresh.granted, true, 'a new pool: no re-count');
      await rs.admin.del(...Object.values(pool().keys));
      const lost = await sync('B', 'ask', { epochSeen: String(fresh.epoch) });
      assert.equal(lost.granted, false, 'a pool lost: the cars still charging are counted again first');
      assert.ok(Number(await rs.admin.hget(pool().k.rules, 'recountUntil')) > Date.now());
    });

    it('GRANT_CONFIGURE, GRANT_SET_LIMIT, GRANT_LIST: the configured rules (a run-time limit kept until the configured one changes), the limit at run time, every entry', async () => {
      await rs.conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 1 })));
      await sync('A', 'ask');
      await sync('B', 'ask');
      const set = JSON.parse(String(await rs.conn.eval(GRANT_SET_LIMIT.call(pool().keys, { ...args({ limit: 1 }), limit: 3, budgetKW: '' }))));
      assert.equal(set.table.limit, 3);
      await rs.conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 1 })));
      assert.equal(Number(await rs.admin.hget(pool().k.rules, 'limit')), 3, 'the same configuration: the run-time limit stays');
      await rs.conn.eval(GRANT_CONFIGURE.call(pool().keys, args({ limit: 2 })));
      const list = JSON.parse(String(await rs.conn.eval(GRANT_LIST.call(pool().keys, args({ limit: 2 })))));
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
        assert.deepEqual(await rs.conn.eval(read.call({}, { raw })), expected, raw);
        const ts = decodeState(raw);
        assert.equal(ts?.rev, expected[0]);
        assert.deepEqual(ts?.state ?? null, expected[2] === '' ? null : JSON.parse(expected[2]));
      }
    });
  });

  describe('when Redis has forgotten the scripts', () => {
    it('EVALSHA answers NOSCRIPT: the script is sent whole once, answers as before, and is known again', async () => {
      const s = rs.keys.scope('s');
      const call = ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['A'] });
      assert.equal(await rs.conn.eval(call), 1);
      assert.deepEqual(await rs.admin.script('EXISTS', ITEM_LIST.sha), [1]);
      await rs.admin.script('FLUSH');
      assert.deepEqual(await rs.admin.script('EXISTS', ITEM_LIST.sha), [0]);
      const seen: string[] = [];
      const monitor = await rs.redis.monitor((args) => seen.push(args[0].toLowerCase()));
      try {
        assert.equal(await rs.conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['B'] })), 2);
        assert.equal(await rs.conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op: '+' }, { args: ['C'] })), 3);
        await rs.admin.echo('done');
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        await monitor.close();
      }
      assert.deepEqual(seen.filter((c) => c === 'evalsha' || c === 'eval'), ['evalsha', 'eval', 'evalsha'], 'NOSCRIPT, then the text once, then by its SHA again');
      assert.deepEqual(await rs.admin.script('EXISTS', ITEM_LIST.sha), [1]);
    });
  });
});

