/**
 * LocalCoordination, the seam's default: a process alone sends at once, holds
 * every token and target, and keeps state where the node keeps it. The nodes
 * call it unconditionally, so it must be exactly today's single-process
 * behaviour (the runtime suites cover it through the nodes; this names it).
 */
import assert from 'node:assert/strict';
import { LocalCoordination } from '../../../nodes/lib/coordination/local';
import type { LocalControlStore } from '../../../nodes/lib/coordination/coordination';
import { ChargingError } from '../../../nodes/lib/errors';
import { SessionWatcher } from '../../../nodes/lib/session/watcher';
import type { ChargingCommand } from '../../../nodes/lib/session/commands';

const START: ChargingCommand = { action: 'START', locationId: 'L', evseId: 'E', token: 'RFID-1' };
const voice = { warnOnce: () => undefined, report: () => undefined };

describe('LocalCoordination (the process alone)', () => {
  it('runs a command once, here, and says no replica sent it; a failure is the caller\'s', async () => {
    const c = new LocalCoordination();
    let sent = 0;
    const run = await c.commands.run(START, async () => ++sent, 30_000, () => assert.fail('nothing to share'));
    assert.deepEqual(run, { role: 'sent', deduplicated: false, result: 1 });
    assert.equal(sent, 1);
    await assert.rejects(c.commands.run(START, () => Promise.reject(new ChargingError('HTTP', 'refused')), 30_000, () => undefined), /refused/);
    assert.equal(c.clientHooks(), undefined, 'the client keeps its own token and budget');
  });

  it('a watch share is the watcher\'s own list: every token polled here, seeded only on resume, no commit hook', async () => {
    const share = new LocalCoordination().watch('w', { voice, show: () => assert.fail('no fleet to show') });
    assert.deepEqual(share.watcherOptions(), {});
    const w = new SessionWatcher(async () => null, { intervalMs: 60_000 }, () => undefined, () => undefined);
    try {
      share.attach(w, () => undefined);
      const seeded: string[] = [];
      share.resume(['A', 'B'], (t) => (seeded.push(t), undefined));
      share.watch(['C']);
      assert.equal(w.size, 3);
      assert.equal(share.total, 3);
      assert.deepEqual(seeded.sort(), ['A', 'B']);
      share.unwatch(['A']);
      assert.equal(share.total, 2);
      share.unwatchAll();
      assert.equal(w.size, 0);
    } finally {
      w.close();
    }
  });

  it('a control share keeps memory in the node\'s store, commands every target, and forgets only when the node is removed', async () => {
    let cleared = 0;
    const store: LocalControlStore = { load: async () => [], save: async () => undefined, clear: async () => void cleared++ };
    const share = new LocalCoordination().control('c', voice, store);
    const deps = share.deps();
    assert.equal(deps.store, store);
    assert.equal(deps.mayCommand, undefined, 'no lease: the controller may always command');
    await share.close(false);
    assert.equal(cleared, 0, 'a redeploy keeps the targets for the next node');
    await share.close(true);
    assert.equal(cleared, 1);
  });
});
