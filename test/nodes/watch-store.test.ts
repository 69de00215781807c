/**
 * WatchStore batches the states a watch node keeps across restarts (#19): many
 * changes in a second are one context write, with the latest state of each
 * token; an unwatched token's pending state is never written; flush() writes
 * at once (the node closes).
 */
import assert from 'node:assert/strict';
import { STATE_BATCH_MS, WatchStore } from '../../nodes/common/watch-store';
import type { SavedState } from '../../nodes/lib/session/watcher';

type Write = { keys: string[]; values: unknown[] };

function storeWith(now: () => number) {
  const writes: Write[] = [];
  const node = {
    id: 'n1',
    context: () => ({
      flow: {
        get: (_k: string, _s: string | undefined, cb: (err: null, v: unknown) => void) => cb(null, undefined),
        set: (keys: string[], values: unknown[], _s: string | undefined, cb: (err: null) => void) => {
          writes.push({ keys, values });
          cb(null);
        },
      },
    }),
  };
  const errors: Error[] = [];
  return { store: new WatchStore(node as never, undefined, (e) => errors.push(e), now), writes, errors };
}

const state = (meterEnd: number): SavedState => ({ transactionId: 'TX-1', meterEnd, session: null });

describe('WatchStore: batched state writes', () => {
  it('many changes within STATE_BATCH_MS are one write, with the latest state of each token', () => {
    let t = 10_000;
    const { store, writes, errors } = storeWith(() => t);
    store.state('A', state(1));
    store.flushDue();
    assert.equal(writes.length, 1, 'the first change after a quiet spell is written at the next tick');
    for (let i = 2; i <= 10; i++) {
      t += 100;
      store.state('A', state(i));
      store.state('B', state(100 + i));
      store.flushDue();
    }
    assert.equal(writes.length, 1, `no write within ${STATE_BATCH_MS} ms of the last`);
    t += 100;
    store.flushDue();
    assert.equal(writes.length, 2);
    assert.deepEqual(writes[1].keys, ['"charging-watch-n1"["t:A"].state', '"charging-watch-n1"["t:B"].state']);
    assert.deepEqual(
      writes[1].values.map((v) => (v as SavedState).meterEnd),
      [10, 110],
    );
    store.flushDue();
    assert.equal(writes.length, 2, 'nothing pending: nothing written');
    assert.deepEqual(errors, []);
  });

  it('an unwatched token\u2019s pending state is dropped, a cleared store writes none; flush() writes at once', () => {
    const t = 0;
    const { store, writes } = storeWith(() => t);
    store.state('A', state(1));
    store.state('B', state(2));
    store.removed(['A']);
    store.flush();
    const stateWrites = writes.filter((w) => w.keys.some((k) => k.endsWith('.state')));
    assert.equal(stateWrites.length, 1);
    assert.deepEqual(stateWrites[0].keys, ['"charging-watch-n1"["t:B"].state'], 'A was unwatched: its state is not written back');
    store.state('C', state(3));
    store.clear();
    store.flush();
    assert.equal(writes.filter((w) => w.keys.some((k) => k.includes('t:C'))).length, 0, 'cleared: C is not written');
    store.state('D', undefined);
    store.flush();
    assert.deepEqual(writes.at(-1), { keys: ['"charging-watch-n1"["t:D"].state'], values: [undefined] }, 'an ended session deletes its state');
  });

  it('an asynchronous store that answers after close resumes nothing and writes nothing (a redeploy during a slow read)', () => {
    const writes: Write[] = [];
    let answer: ((err: null, v: unknown) => void) | null = null;
    const node = {
      id: 'n1',
      context: () => ({
        flow: {
          get: (_k: string, _s: string | undefined, cb: (err: null, v: unknown) => void) => void (answer = cb),
          set: (keys: string[], values: unknown[], _s: string | undefined, cb: (err: null) => void) => {
            writes.push({ keys, values });
            cb(null);
          },
        },
      }),
    };
    const store = new WatchStore(node as never, 'redis', () => undefined);
    let resumed = 0;
    store.load(() => resumed++);
    store.state('A', state(1));
    store.clear(true); // the node was removed while the read was on its way
    store.close();
    const before = writes.length;
    assert.ok(answer, 'the read was asked');
    // The old list form: answered late, it would be rewritten in the new form.
    (answer as (err: null, v: unknown) => void)(null, ['A', 'B']);
    store.state('B', state(2));
    store.added(['C']);
    store.flush();
    assert.equal(resumed, 0, 'nothing resumed after close');
    assert.equal(writes.length, before, 'nothing written after close');
  });
});
