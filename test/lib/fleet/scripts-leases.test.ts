/**
 * The lease scope's scripts (nodes/lib/fleet/leases/) called directly against
 * a real redis-server, one branch at a time, as scripts.test.ts does for the
 * others: the scope's members, lease batches, the item list, the state
 * commit, the restore after a data loss, the inbox.
 */
import assert from 'node:assert/strict';
import { SCOPE_HEARTBEAT, SCOPE_LEAVE } from '../../../nodes/lib/fleet/leases/scope-members';
import { LEASES } from '../../../nodes/lib/fleet/leases/lease-batch';
import { ITEM_LIST } from '../../../nodes/lib/fleet/leases/item-list';
import { COMMIT_STATE } from '../../../nodes/lib/fleet/leases/state-commit';
import { RESTORE_STATES } from '../../../nodes/lib/fleet/leases/recovery';
import { POST } from '../../../nodes/lib/fleet/leases/inbox';
import { decodeState, encodeState } from '../../../nodes/lib/fleet/leases/state-codec';
import { scriptSuite } from './script-fixture';

describe('fleet: the lease scope\'s Lua scripts, branch by branch (real redis-server)', function () {
  this.timeout(20_000);
  const rs = scriptSuite();

  describe('lease scopes', () => {
    const beat = (replica: string, opts: { leave?: boolean; epochSeen?: string; markMs?: number; members?: string[] } = {}) => {
      const s = rs.keys.scope('s');
      return rs.conn.eval(
        SCOPE_HEARTBEAT.call(
          { members: s.members, version: s.version, epoch: s.epoch, lossMark: s.lossMark, restores: s.restores },
          { replica, leaseMs: 60_000, leave: opts.leave ? '1' : '0', epochSeen: opts.epochSeen ?? '', markMs: opts.markMs ?? 5_000 },
          { args: opts.members ?? [] },
        ),
      ) as Promise<unknown[]>;
    };

    it('SCOPE_HEARTBEAT: the first one writes the epoch and no loss mark; later ones read it; version and restores as kept; live members', async () => {
      const s = rs.keys.scope('s');
      const first = await beat('a');
      assert.equal(first[0], null, 'no version yet');
      assert.match(String(first[1]), /^\d+\.\d+:a$/);
      assert.equal(first[2], -2, 'no loss mark');
      assert.equal(first[3], null, 'no restores yet');
      assert.deepEqual(first.slice(4), ['a']);
      await rs.admin.set(s.version, '7');
      await rs.admin.set(s.restores, '3');
      const second = await beat('b');
      assert.deepEqual(second.slice(0, 4), ['7', first[1], -2, '3'], 'the same epoch: no loss');
      assert.deepEqual(second.slice(4), ['a', 'b']);
    });

    it('SCOPE_HEARTBEAT: a replica that saw an epoch finds none: a new epoch and the loss mark of the members it saw, for markMs', async () => {
      const s = rs.keys.scope('s');
      const res = await beat('a', { epochSeen: 'old-epoch', markMs: 4_000, members: ['a', 'b', 'c'] });
      assert.notEqual(res[1], 'old-epoch');
      assert.deepEqual((await rs.admin.smembers(s.lossMark)).sort(), ['a', 'b', 'c']);
      const left = Number(res[2]);
      assert.ok(left > 3_000 && left <= 4_000, `the mark lives markMs (${left})`);
      // The next one back, having seen the old epoch too, finds the new one written: no second mark.
      await rs.admin.srem(s.lossMark, 'b');
      const next = await beat('b', { epochSeen: 'old-epoch', members: ['x'] });
      assert.equal(next[1], res[1]);
      assert.deepEqual((await rs.admin.smembers(s.lossMark)).sort(), ['a', 'c']);
    });

    it('SCOPE_HEARTBEAT: standing down takes the replica out of the members but still reads the scope; a lapsed member is pruned', async () => {
      const s = rs.keys.scope('s');
      await beat('a');
      await beat('b');
      await rs.admin.zadd(s.members, 1, 'dead');
      const res = await beat('a', { leave: true });
      assert.deepEqual(res.slice(4), ['b']);
      assert.deepEqual(await rs.admin.zrange(s.members, '0', '-1'), ['b']);
    });

    it('SCOPE_LEAVE: only that member', async () => {
      const s = rs.keys.scope('s');
      await beat('a');
      await beat('b');
      assert.equal(await rs.conn.eval(SCOPE_LEAVE.call({ members: s.members }, { replica: 'a' })), 1);
      assert.deepEqual(await rs.admin.zrange(s.members, '0', '-1'), ['b']);
    });

    it('LEASES: a free lease taken (2), ours renewed (1), another\'s left (0); given back only when ours', async () => {
      const s = rs.keys.scope('s');
      const [free, mine, theirs, giveMine, giveTheirs] = ['free', 'mine', 'theirs', 'give-mine', 'give-theirs'].map((t) => s.lease(t));
      await rs.admin.set(mine, 'me', 'PX', 1_000);
      await rs.admin.set(theirs, 'other', 'PX', 60_000);
      await rs.admin.set(giveMine, 'me', 'PX', 60_000);
      await rs.admin.set(giveTheirs, 'other', 'PX', 60_000);
      const res = await rs.conn.eval(LEASES.call({}, { replica: 'me', leaseMs: 30_000, wanted: 3 }, { keys: [free, mine, theirs, giveMine, giveTheirs] }));
      assert.deepEqual(res, [2, 1, 0, 0, 0]);
      assert.equal(await rs.admin.get(free), 'me');
      assert.ok((await rs.admin.pttl(mine)) > 20_000, 'renewed for the lease time');
      assert.equal(await rs.admin.get(theirs), 'other');
      assert.equal(await rs.admin.get(giveMine), null, 'ours given back');
      assert.equal(await rs.admin.get(giveTheirs), 'other', 'another\'s (taken after ours lapsed) left alone');
    });

    it('ITEM_LIST: the version moves when the list changes (or when there is none); a removed item\'s state goes with it', async () => {
      const s = rs.keys.scope('s');
      const list = (op: '+' | '-', ...items: string[]) => rs.conn.eval(ITEM_LIST.call({ list: s.list, version: s.version, state: s.state }, { op }, { args: items }));
      assert.equal(await list('+', 'A', 'B'), 1);
      assert.equal(await list('+', 'A'), 1, 'nothing new: the same version');
      await rs.admin.del(s.version);
      assert.equal(await list('+', 'A'), 1, 'no version: one is written');
      await rs.admin.hset(s.state, 'A', '5::{}', 'B', '6::{}');
      assert.equal(await list('-', 'A', 'Z'), 2);
      assert.deepEqual(await rs.admin.smembers(s.list), ['B']);
      assert.deepEqual(await rs.admin.hkeys(s.state), ['B']);
      assert.equal(await list('-', 'Z'), 2, 'nothing removed: the same version');
    });

    describe('COMMIT_STATE', () => {
      const s = () => rs.keys.scope('s');
      const commit = (item: string, expectedRev: number, json: string, commitId: string, opts: { replica?: string; heldByClock?: boolean } = {}) =>
        rs.conn.eval(COMMIT_STATE.call({ lease: s().lease(item), state: s().state }, { replica: opts.replica ?? 'me', item, expectedRev, json, commitId, heldByClock: opts.heldByClock ? '1' : '0' }));
      const id = (c: string) => c.repeat(16);

      it('from nothing by the holder: the revision is Redis\'s clock; then +1 per commit; the last 8 ids kept, newest first', async () => {
        await rs.admin.set(s().lease('T'), 'me');
        const before = await rs.redisMs();
        const rev = Number(await commit('T', 0, '{"n":1}', id('a')));
        assert.ok(rev >= before && rev <= (await rs.redisMs()), 'a revision from Redis\'s clock');
        const ids = 'bcdefghij'.split('').map((c) => id(c.replace(/[g-j]/, (x) => String(x.charCodeAt(0) - 100))));
        let r = rev;
        for (const c of ids) r = Number(await commit('T', r, '{"n":2}', c));
        assert.equal(r, rev + ids.length);
        const raw = String(await rs.admin.hget(s().state, 'T'));
        assert.equal(raw, encodeState(r, [...ids].reverse().slice(0, 8), { n: 2 }));
        assert.deepEqual(decodeState(raw), { rev: r, state: { n: 2 } });
      });

      it('a retry of an applied commit: answered with its revision; the newest one refreshes the state, an older one writes nothing', async () => {
        await rs.admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        const r2 = Number(await commit('T', r1, '{"n":2}', id('b')));
        assert.equal(await commit('T', r1, '{"n":22}', id('b')), r2, 'the newest retried: its revision');
        assert.deepEqual(decodeState(await rs.admin.hget(s().state, 'T')), { rev: r2, state: { n: 22 } }, 'and its state refreshed');
        assert.equal(await commit('T', 0, '{"n":11}', id('a')), r2, 'an older one retried: the current revision');
        assert.deepEqual(decodeState(await rs.admin.hget(s().state, 'T')), { rev: r2, state: { n: 22 } }, 'nothing written');
      });

      it('another replica\'s lease: -1; a stale revision of ours: {-2, current}', async () => {
        await rs.admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        assert.deepEqual(await commit('T', r1 - 1, '{"n":2}', id('b')), [-2, r1]);
        await rs.admin.set(s().lease('T'), 'other');
        assert.equal(await commit('T', r1, '{"n":2}', id('c')), -1);
        assert.equal(await commit('T', r1, '{"n":2}', id('c'), { heldByClock: true }), -1, 'held by another: no matter our clock');
      });

      it('a free lease: refused unless the caller still holds the item by its own clock and expects the revision there', async () => {
        await rs.admin.set(s().lease('T'), 'me');
        const r1 = Number(await commit('T', 0, '{"n":1}', id('a')));
        await rs.admin.del(s().lease('T'));
        assert.equal(await commit('T', r1, '{"n":2}', id('b')), -1, 'its own clock says it lapsed');
        assert.equal(await commit('T', r1 - 1, '{"n":2}', id('b'), { heldByClock: true }), -1, 'another revision expected: refused, not stale');
        assert.equal(await commit('T', r1, '{"n":2}', id('b'), { heldByClock: true }), r1 + 1);
      });

      it('reads a state in the format kept before commit ids, and a tombstone', async () => {
        await rs.admin.set(s().lease('T'), 'me');
        await rs.admin.hset(s().state, 'T', '41:{"n":0}');
        assert.equal(await commit('T', 41, '', id('a')), 42);
        assert.equal(await rs.admin.hget(s().state, 'T'), `42:${id('a')}:`);
        assert.deepEqual(decodeState(await rs.admin.hget(s().state, 'T')), { rev: 42, state: null });
      });
    });

    it('RESTORE_STATES: over an older state or none only, in the codec\'s format; the replica leaves the mark; a restore that wrote is counted', async () => {
      const s = rs.keys.scope('s');
      await rs.admin.hset(s.state, 'OLD', encodeState(5, ['a'.repeat(16)], { v: 'old' }), 'NEW', encodeState(9, [], { v: 'new' }));
      await rs.admin.sadd(s.lossMark, 'me', 'other');
      const restore = (...triples: string[]) => rs.conn.eval(RESTORE_STATES.call({ state: s.state, lossMark: s.lossMark, restores: s.restores }, { replica: 'me' }, { args: triples }));
      assert.deepEqual(await restore('OLD', '7', '{"v":"mine"}', 'NEW', '8', '{"v":"mine"}', 'NONE', '3', ''), [7, 9, 3]);
      assert.equal(await rs.admin.hget(s.state, 'OLD'), '7::{"v":"mine"}');
      assert.deepEqual(decodeState(await rs.admin.hget(s.state, 'NEW')), { rev: 9, state: { v: 'new' } }, 'a newer state is never overwritten');
      assert.deepEqual(decodeState(await rs.admin.hget(s.state, 'NONE')), { rev: 3, state: null });
      assert.deepEqual(await rs.admin.smembers(s.lossMark), ['other']);
      assert.equal(await rs.admin.get(s.restores), '1');
      assert.deepEqual(await restore('NEW', '2', '{}'), [9]);
      assert.equal(await rs.admin.get(s.restores), '1', 'a restore that wrote nothing is not counted');
    });

    it('POST: each message under a number above the last, at least Redis\'s clock in µs; the newest per item kept; after Redis lost the inbox, still above every earlier one', async () => {
      const inbox = rs.keys.scope('s', 'node').inbox;
      const post = async (item: string, text: string) => Number(await rs.conn.eval(POST.call({ inbox }, { item, text })));
      const before = (await rs.redisMs()) * 1000;
      const a = await post('A', '{"wanted":true}');
      const b = await post('B', 'x');
      const c = await post('A', '{"wanted":false}');
      assert.ok(a >= before && b > a && c > b, `${before} ${a} ${b} ${c}`);
      assert.ok(Number.isSafeInteger(c), 'an exact integer');
      assert.deepEqual(await rs.admin.hgetall(inbox), { '#seq': String(c), A: `${c}:{"wanted":false}`, B: `${b}:x` });
      await rs.admin.hset(inbox, '#seq', String(c + 5_000_000_000)); // a counter ahead of the clock: numbers go on from it
      assert.equal(await post('B', 'y'), c + 5_000_000_001);
      await rs.admin.del(inbox); // Redis lost its data: a holder still remembers the last number it applied
      assert.ok((await post('A', '{"wanted":true}')) > c, 'above the numbers given before the loss');
    });
  });

});
