/**
 * LocalCoordination, the seam's default: a process alone runs its claims at
 * once, holds every item of every list, and keeps state where the node
 * keeps it. The nodes call it unconditionally, so it must be exactly the
 * single-process behaviour (the runtime suites cover it through the nodes;
 * this names it, without Redis).
 */
import assert from 'node:assert/strict';
import { LocalCoordination } from '../../../nodes/lib/coordination/local';
import type { LeaseChange, Posted } from '../../../nodes/lib/coordination/leases';
import { openControlShare, type LocalControlStore } from '../../../nodes/lib/control/control-share';
import { ChargingError } from '../../../nodes/lib/errors';
import { SessionWatcher } from '../../../nodes/lib/session/watcher';
import { WatchShare } from '../../../nodes/lib/session/watch-share';
import { commandClaimKey, commandClaimPolicy, type ChargingCommand } from '../../../nodes/lib/session/commands';

const START: ChargingCommand = { action: 'START', locationId: 'L', evseId: 'E', token: 'RFID-1' };
const voice = { warnOnce: () => undefined, report: () => undefined };

describe('LocalCoordination (the process alone)', () => {
  it('runs a command once, here, and says no replica sent it; a failure is the caller\'s', async () => {
    const c = new LocalCoordination();
    let sent = 0;
    const run = await c.claims.run(commandClaimKey(START), async () => ++sent, commandClaimPolicy(START, 30_000), () => assert.fail('nothing to share'));
    assert.deepEqual(run, { role: 'ran', shared: false, result: 1 });
    assert.equal(sent, 1);
    await assert.rejects(c.claims.run(commandClaimKey(START), () => Promise.reject(new ChargingError('HTTP', 'refused')), commandClaimPolicy(START, 30_000), () => undefined), /refused/);
    assert.equal(c.clientHooks(), undefined, 'the client keeps its own token and budget');
  });

  it('a lease scope holds every item on its list at once, until it is removed; commits are answered at once; a message reaches this process at once', async () => {
    const changes: LeaseChange<{ n: number }>[] = [];
    const messages: Array<Map<string, Posted>> = [];
    const leases = new LocalCoordination().leases;
    assert.equal(leases.lapses, false);
    const scope = leases.open<{ n: number }>('s', { onChange: (c) => changes.push(c), onMessages: (m) => messages.push(m) });
    assert.equal(scope.lapses, false);
    assert.equal(scope.up, true);
    await scope.add(['A', 'B']);
    await scope.add(['B', 'C']);
    assert.deepEqual(changes.map((c) => c.acquired.map((a) => [a.item, a.saved])), [[['A', null], ['B', null]], [['C', null]]], 'each item once, with nothing kept');
    assert.deepEqual(scope.owned().sort(), ['A', 'B', 'C']);
    assert.equal(scope.holds('A'), true);
    const first = await scope.commit('A', { n: 1 });
    const second = await scope.commit('A', { n: 2 });
    assert.ok(first.ok && second.ok && second.rev > first.rev);
    assert.deepEqual(await scope.commit('Z', { n: 1 }), { ok: false, reason: 'not-owner', message: 'Z is not on the list' });
    const seq = await scope.post('B', 'on');
    assert.deepEqual(messages, [new Map([['B', { seq, text: 'on' }]])]);
    assert.deepEqual(await scope.newest(['B', 'C']), new Map([['B', { seq, text: 'on' }], ['C', null]]));
    await scope.remove(['A']);
    assert.deepEqual(changes.at(-1)?.released.map((r) => [r.item, r.reason]), [['A', 'unwatched']]);
    assert.equal(scope.holds('A'), false);
    await scope.close();
    assert.deepEqual(scope.owned(), [], 'nothing held once closed');
  });

  it('a watch share on the local leases is the watcher\'s own list: every token polled here, no fence, no commit hook, seeds from the node\'s states', async () => {
    const share = new WatchShare(new LocalCoordination().leases, 'w', { voice, show: () => assert.fail('no fleet to show') });
    assert.deepEqual(share.watcherOptions(), {});
    const w = new SessionWatcher(async () => null, { intervalMs: 60_000 }, () => undefined, () => undefined);
    try {
      share.attach(w, () => undefined);
      const seeded: string[] = [];
      share.resume(['A', 'B'], (t) => (seeded.push(t), undefined));
      share.watch(['C']);
      assert.equal(w.size, 3);
      assert.equal(share.total, 3);
      // The node's kept state is asked for every token the list gives without one (alone: always).
      assert.deepEqual(seeded.sort(), ['A', 'B', 'C']);
      share.unwatch(['A']);
      assert.equal(share.total, 2);
      share.unwatchAll();
      assert.equal(w.size, 0);
    } finally {
      w.close();
      await share.close(true);
    }
  });

  it('a control share keeps memory in the node\'s store, commands every target, and forgets only when the node is removed', async () => {
    let cleared = 0;
    const store: LocalControlStore = { load: async () => [], save: async () => undefined, clear: async () => void cleared++ };
    const share = openControlShare(new LocalCoordination().leases, 'c', voice, store);
    const deps = share.deps();
    assert.equal(deps.store, store);
    assert.equal(deps.mayCommand, undefined, 'no lease: the controller may always command');
    await share.close(false);
    assert.equal(cleared, 0, 'a redeploy keeps the targets for the next node');
    await share.close(true);
    assert.equal(cleared, 1);
  });
});
