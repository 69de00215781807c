/**
 * The one status helper's board: a burst of updates shows at most one per gap,
 * always the latest, and the last state of a burst is never lost; a watch
 * node's board (WATCH_STATUS_GAP_MS) changes at most once a second.
 */
import assert from 'node:assert/strict';
import sinon from 'sinon';
import { Status } from '../../nodes/common/status';
import { StatusBoard, STATUS_GAP_MS, WATCH_STATUS_GAP_MS } from '../../nodes/common/status-board';

type Shown = { fill?: string; shape?: string; text?: string };

describe('StatusBoard: coalesced badges', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  });
  afterEach(() => clock.restore());

  const board = (gap?: number) => {
    const shown: Array<{ at: number; status: Shown }> = [];
    const b = new StatusBoard({ status: (s: Shown) => void shown.push({ at: Date.now(), status: s }) } as never, () => Date.now());
    if (gap !== undefined) b.setGap(gap);
    return { b, shown };
  };

  for (const [name, gap] of [
    ['default', STATUS_GAP_MS],
    ['watch node', WATCH_STATUS_GAP_MS],
  ] as const) {
    it(`${name}: at most one update per ${gap} ms under a burst, the latest shown, the last never lost`, () => {
      const { b, shown } = board(name === 'default' ? undefined : gap);
      // 10 updates a second for 5 s, each with its own count.
      for (let i = 1; i <= 50; i++) {
        b.set(Status.ok('watching', { count: i }));
        clock.tick(100);
      }
      clock.tick(gap);
      const gaps = shown.slice(1).map((s, i) => s.at - shown[i].at);
      assert.ok(gaps.every((g) => g >= gap), `gaps ${gaps.join(', ')} all >= ${gap}`);
      assert.ok(shown.length <= Math.ceil(5000 / gap) + 1, `${shown.length} updates in 5 s`);
      assert.ok(shown.length >= Math.floor(5000 / gap), `${shown.length} updates in 5 s: the board keeps showing under a steady stream`);
      assert.match(String(shown.at(-1)?.status.text), /^watching 50\b/, 'the last update of the burst is shown');
      // Each shown badge is the latest at its time: the counts only grow.
      const counts = shown.map((s) => Number(/watching (\d+)/.exec(String(s.status.text))?.[1]));
      assert.deepEqual(
        counts,
        [...counts].sort((x, y) => x - y),
      );
    });
  }

  it('a lazy badge is made only when shown', () => {
    const { b, shown } = board(WATCH_STATUS_GAP_MS);
    let made = 0;
    for (let i = 0; i < 30; i++) {
      b.set(() => (made++, Status.ok('watching', { count: i })));
      clock.tick(50);
    }
    clock.tick(WATCH_STATUS_GAP_MS);
    assert.equal(made, shown.length);
    assert.ok(made <= 3, `${made} badges made for 30 updates over 1.5 s`);
  });

  it('a deferred badge arms no timer: the next due() after the gap shows the latest; a set() still arms its own', () => {
    const { b, shown } = board(WATCH_STATUS_GAP_MS);
    b.defer(Status.ok('watching', { count: 1 }));
    assert.equal(shown.length, 1, 'the first is shown at once');
    for (let i = 2; i <= 5; i++) {
      clock.tick(100);
      b.defer(Status.ok('watching', { count: i }));
      b.due();
    }
    assert.equal(shown.length, 1, 'within the gap: nothing more shown');
    assert.equal(clock.countTimers(), 0, 'no timer armed for a deferred badge');
    clock.tick(WATCH_STATUS_GAP_MS);
    assert.equal(shown.length, 1, 'no timer: nothing shown without due()');
    b.due();
    assert.equal(shown.length, 2);
    assert.match(String(shown[1].status.text), /^watching 5\b/, 'the latest deferred badge');
    b.due();
    assert.equal(shown.length, 2, 'due() with nothing pending shows nothing');
    // A set() too soon arms its timer, and a deferred badge after it rides on that timer.
    b.set(Status.ok('watching', { count: 6 }));
    b.defer(Status.ok('watching', { count: 7 }));
    assert.equal(clock.countTimers(), 1);
    clock.tick(WATCH_STATUS_GAP_MS);
    assert.equal(shown.length, 3);
    assert.match(String(shown[2].status.text), /^watching 7\b/);
  });

  it('shows nothing after close but the cleared badge', () => {
    const { b, shown } = board();
    b.set(Status.ok('watching', { count: 1 }));
    b.set(Status.ok('watching', { count: 2 }));
    b.close();
    clock.tick(1000);
    assert.deepEqual(
      shown.map((s) => s.status.text),
      [shown[0].status.text, undefined],
    );
    assert.match(String(shown[0].status.text), /^watching 1\b/);
  });
});
