import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import sinon from 'sinon';
import { ended, started, waitForSession } from '../../../nodes/lib/session/wait';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ProgressRecord } from '../../../nodes/lib/session/record';

const pending: ProgressRecord = { tokenId: 'T' };
const running = (tx: string): ProgressRecord => ({ tokenId: 'T', transactionData: { transactionId: tx } });
const pause = (ms: number) => sleep(ms);

describe('waitForSession (no Node-RED, fake timers)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  it('resolves when the wanted record shows up, polling at the interval', async () => {
    let n = 0;
    const polledAt: number[] = [];
    const done = waitForSession(
      async () => {
        polledAt.push(Date.now());
        return ++n >= 3 ? running('TX-1') : pending;
      },
      'T',
      started,
      'START',
      { timeoutMs: 10_000, intervalMs: 1_000 },
      pause,
    );
    await clock.tickAsync(2_500);
    const r = await done;
    assert.equal(r?.transactionData?.transactionId, 'TX-1');
    assert.deepEqual(polledAt, [0, 1_000, 2_000]);
  });

  it('rejects with NOT_CONFIRMED when the time runs out, naming the last poll error', async () => {
    const done = waitForSession(async () => Promise.reject(new ChargingError('HTTP', 'answered 503')), 'T', () => true, 'START', { timeoutMs: 3_000, intervalMs: 1_000 }, pause);
    const settled = assert.rejects(done, (e: ChargingError) => e.code === 'NOT_CONFIRMED' && /START was not confirmed within 3 s.*last poll: answered 503/.test(e.message));
    await clock.tickAsync(3_500);
    await settled;
  });

  it('a STOP is confirmed when the session is gone or another transaction holds the token', () => {
    const want = ended('TX-1');
    assert.equal(want(null), true);
    assert.equal(want(running('TX-2')), true);
    assert.equal(want(running('TX-1')), false);
  });
});
