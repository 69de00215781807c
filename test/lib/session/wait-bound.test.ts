import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import sinon from 'sinon';
import { MIN_POLL_MS, started, waitForSession } from '../../../nodes/lib/session/wait';
import { ChargingError } from '../../../nodes/lib/errors';

// Issue 16.5: a poll that hangs is cut at what is left of the wait, so the wait ends on time.
describe('waitForSession bounds each poll by what is left of the wait (fake timers)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  /** A poll that answers only when its signal fires (as the client does when aborted). */
  const hanging = (budgets: number[]) => (_token: string, signal?: AbortSignal) =>
    new Promise<never>((_resolve, reject) => {
      const from = Date.now();
      signal?.addEventListener('abort', () => {
        budgets.push(Date.now() - from);
        reject(new ChargingError('CLOSED', 'cut'));
      });
    });

  it('a hanging poll is cut when the wait runs out: NOT_CONFIRMED at the wait, not later', async () => {
    const budgets: number[] = [];
    let endedAt = -1;
    const done = waitForSession(hanging(budgets), 'T', started, 'START', { timeoutMs: 3_000, intervalMs: 1_000 }, (ms) => sleep(ms)).catch((err: unknown) => {
      endedAt = Date.now();
      return err;
    });
    await clock.tickAsync(3_000 + MIN_POLL_MS);
    const err = await done;
    assert.ok(err instanceof ChargingError && err.code === 'NOT_CONFIRMED', String(err));
    assert.match(err.message, /no answer within/);
    assert.equal(budgets[0], 3_000, 'the first poll had the whole wait, no more');
    assert.ok(endedAt <= 3_000 + MIN_POLL_MS, `ended at ${endedAt}`);
  });

  it('the caller aborting (the node closing) is CLOSED, not a timed-out poll', async () => {
    const close = new AbortController();
    const done = waitForSession(hanging([]), 'T', started, 'START', { timeoutMs: 3_000, intervalMs: 1_000, signal: close.signal }, (ms) => sleep(ms)).catch((err: unknown) => err);
    await clock.tickAsync(100);
    close.abort();
    const err = await done;
    assert.ok(err instanceof ChargingError && err.code === 'CLOSED', String(err));
  });
});
