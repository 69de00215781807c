import assert from 'node:assert/strict';
import sinon from 'sinon';
import { SessionWatcher, waitForSession } from '../../nodes/lib/session-watcher';
import { ChargingError } from '../../nodes/lib/errors';
import type { ProgressRecord } from '../../nodes/lib/session';
import { sleep } from '../../nodes/lib/concurrency-limiter';

function record(meterEnd: number | null, at: string, tx = 'TX-1'): ProgressRecord {
  const r: ProgressRecord = { eventType: 'Updated', timestamp: at, createdAt: '2026-11-22T10:00:00Z', evseId: 1, tokenId: 'T', locationId: 'L' };
  if (meterEnd !== null) r.transactionData = { transactionId: tx, cdrId: 'c-1', meterStart: 1000, meterEnd };
  return r;
}

describe('SessionWatcher (no Node-RED, no HTTP)', () => {
  describe('events', () => {
    const make = (emitEveryPoll = false) => new SessionWatcher(async () => null, { intervalMs: 1000, emitEveryPoll }, () => undefined, () => undefined);
    const entry = () => ({ token: 'T', inFlight: false, seen: false, transactionId: null, meterEnd: null, last: null, sample: null, lastError: null });

    it('pending -> started -> updated -> (nothing) -> ended', () => {
      const w = make();
      const e = entry();
      const kinds = (r: ProgressRecord | null) => w.observe(e, r).map((x) => x.event);
      assert.deepEqual(kinds(record(null, '2026-11-22T10:00:01')), ['pending']);
      assert.deepEqual(kinds(record(1000, '2026-11-22T10:00:02')), ['started']);
      assert.deepEqual(kinds(record(1500, '2026-11-22T10:01:02')), ['updated']);
      assert.deepEqual(kinds(record(1500, '2026-11-22T10:01:12')), []);
      assert.deepEqual(kinds(null), ['ended']);
      assert.deepEqual(kinds(null), [], 'no repeat of ended');
    });

    it('reports every poll when asked', () => {
      const w = make(true);
      const e = entry();
      assert.deepEqual(w.observe(e, null).map((x) => x.event), ['poll']);
      w.observe(e, record(1000, '2026-11-22T10:00:02'));
      assert.deepEqual(w.observe(e, record(1000, '2026-11-22T10:00:12')).map((x) => x.event), ['poll']);
    });

    it('a new transaction for the same token between polls is ended + started', () => {
      const w = make();
      const e = entry();
      w.observe(e, record(1000, '2026-11-22T10:00:02', 'TX-1'));
      assert.deepEqual(w.observe(e, record(1000, '2026-11-22T11:00:02', 'TX-2')).map((x) => x.event), ['ended', 'started']);
    });

    it('estimates power from successive readings by the record clock, and keeps the last estimate on a repeat', () => {
      const w = make();
      const e = entry();
      w.observe(e, record(1000, '2026-11-22T10:00:00'));
      const [up] = w.observe(e, record(1000 + 11_000 / 60, '2026-11-22T10:01:00')); // 11 kW for one minute, in Wh
      assert.equal(up.session?.powerKW, 11);
      assert.equal(up.session?.energyKWh, 0.183);
    });

    it('gives no power for a meter that went backwards', () => {
      const w = make();
      const e = entry();
      w.observe(e, record(5000, '2026-11-22T10:00:00'));
      const [ev] = w.observe(e, record(4000, '2026-11-22T10:01:00'));
      assert.equal(ev.session?.powerKW, null);
    });
  });

  describe('scheduling (fake timers)', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({ now: 0, toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    });
    afterEach(() => clock.restore());

    it('spreads 100 tokens evenly over the interval with one timer, each polled once per interval', async () => {
      const polls: Array<{ token: string; at: number }> = [];
      const w = new SessionWatcher(
        async (token) => {
          polls.push({ token, at: Date.now() });
          return null;
        },
        { intervalMs: 10_000 },
        () => undefined,
        () => undefined,
      );
      for (let i = 0; i < 100; i++) w.watch(`T${i}`);
      await clock.tickAsync(30_000);
      const perToken = new Map<string, number>();
      for (const p of polls) perToken.set(p.token, (perToken.get(p.token) ?? 0) + 1);
      assert.equal(perToken.size, 100);
      for (const n of perToken.values()) assert.ok(n >= 2 && n <= 4, `polled ${n} times in 3 intervals`);
      // Even: no second of the run sees more than a quarter of the polls.
      const perSecond = new Map<number, number>();
      for (const p of polls) perSecond.set(Math.floor(p.at / 1000), (perSecond.get(Math.floor(p.at / 1000)) ?? 0) + 1);
      assert.ok(Math.max(...perSecond.values()) <= 20, `burst of ${Math.max(...perSecond.values())} in one second`);
      assert.equal(clock.countTimers(), 1, 'one timer for all tokens');
      w.close();
    });

    it('does not poll a token again while its previous poll is still running', async () => {
      let running = 0;
      let peak = 0;
      const w = new SessionWatcher(
        async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(5_000);
          running--;
          return null;
        },
        { intervalMs: 1_000 },
        () => undefined,
        () => undefined,
      );
      w.watch('T');
      await clock.tickAsync(10_000);
      assert.equal(peak, 1);
      w.close();
    });

    it('reports a failing poll once per streak, and again after a recovery', async () => {
      let fail = true;
      const errors: string[] = [];
      const w = new SessionWatcher(
        async () => {
          if (fail) throw new ChargingError('HTTP', 'service answered 503');
          return null;
        },
        { intervalMs: 1_000 },
        () => undefined,
        (_t, e) => errors.push(e.message),
      );
      w.watch('T');
      await clock.tickAsync(5_000);
      assert.equal(errors.length, 1);
      fail = false;
      await clock.tickAsync(2_000);
      fail = true;
      await clock.tickAsync(2_000);
      assert.equal(errors.length, 2);
      w.close();
    });

    it('stops polling on unwatch and on close, leaving no timer', async () => {
      const polls: string[] = [];
      const w = new SessionWatcher(
        async (t) => {
          polls.push(t);
          return null;
        },
        { intervalMs: 1_000 },
        () => undefined,
        () => undefined,
      );
      w.watch('A');
      w.watch('B');
      await clock.tickAsync(2_000);
      w.unwatch('A');
      const afterUnwatch = polls.length;
      await clock.tickAsync(3_000);
      assert.ok(polls.slice(afterUnwatch).every((t) => t === 'B'));
      w.close();
      const n = polls.length;
      await clock.tickAsync(10_000);
      assert.equal(polls.length, n);
      assert.equal(clock.countTimers(), 0);
    });
  });

  describe('waitForSession', () => {
    it('resolves when the wanted record shows up', async () => {
      let n = 0;
      const r = await waitForSession(async () => (++n >= 3 ? record(1000, 'x') : record(null, 'x')), 'T', (x) => Boolean(x?.transactionData), 'START', { timeoutMs: 2000, intervalMs: 5 }, sleep);
      assert.equal(n, 3);
      assert.equal(r?.transactionData?.transactionId, 'TX-1');
    });

    it('rejects with NOT_CONFIRMED after the timeout, naming the last poll error', async () => {
      await assert.rejects(
        waitForSession(async () => Promise.reject(new ChargingError('HTTP', 'answered 503')), 'T', () => true, 'START', { timeoutMs: 50, intervalMs: 10 }, sleep),
        (e: ChargingError) => e.code === 'NOT_CONFIRMED' && /START was not confirmed within 0 s.*last poll: answered 503/.test(e.message),
      );
    });
  });
});
