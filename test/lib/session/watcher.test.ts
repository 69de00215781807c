import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import sinon from 'sinon';
import { POLLS_PER_TICK, SavedState, SessionWatcher, watchTickMs, WatchEvent, WatchedSession } from '../../../nodes/lib/session/watcher';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ProgressRecord } from '../../../nodes/lib/session/record';

function record(meterEnd: number | null, at: string, tx = 'TX-1'): ProgressRecord {
  const r: ProgressRecord = { eventType: 'Updated', timestamp: at, createdAt: '2026-11-22T10:00:00Z', evseId: 1, tokenId: 'T', locationId: 'L' };
  if (meterEnd !== null) r.transactionData = { transactionId: tx, cdrId: 'c-1', meterStart: 1000, meterEnd };
  return r;
}

describe('SessionWatcher (no Node-RED, no HTTP)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  /** A watcher of one token whose polls answer the given records in turn (then null), one per second. */
  async function eventsFor(answers: Array<ProgressRecord | null>, emitEveryPoll = false): Promise<WatchEvent[]> {
    const events: WatchEvent[] = [];
    const queue = [...answers];
    const w = new SessionWatcher(async () => (queue.length > 0 ? (queue.shift() as ProgressRecord | null) : null), { intervalMs: 1_000, emitEveryPoll }, (e) => events.push(e), () => undefined);
    w.watch(['T']);
    // + 1 s: room for the query that confirms an end (half the interval after the "not found").
    await clock.tickAsync(answers.length * 1_000 + 1_010);
    w.close();
    return events;
  }

  describe('events', () => {
    it('pending -> started -> updated -> (nothing) -> ended, and no repeat of ended', async () => {
      const events = await eventsFor([record(null, '2026-11-22T10:00:01'), record(1000, '2026-11-22T10:00:02'), record(1500, '2026-11-22T10:01:02'), record(1500, '2026-11-22T10:01:12'), null, null]);
      assert.deepEqual(
        events.map((e) => e.event),
        ['pending', 'started', 'updated', 'ended'],
      );
      assert.equal(events[3].record, null);
      assert.equal(events[3].session?.meterEnd, 1500, 'ended carries the last values seen');
    });

    it('reports every poll when asked', async () => {
      const events = await eventsFor([null, record(1000, '2026-11-22T10:00:02'), record(1000, '2026-11-22T10:00:12')], true);
      assert.deepEqual(
        events.slice(0, 3).map((e) => e.event),
        ['poll', 'started', 'poll'],
      );
    });

    it('one "not found" while the session was active is confirmed by a second query before ended: a blip ends nothing', async () => {
      const events = await eventsFor([record(1000, '2026-11-22T10:00:02'), null, record(1200, '2026-11-22T10:00:22'), record(1300, '2026-11-22T10:00:32')]);
      assert.deepEqual(
        events.map((e) => e.event),
        ['started', 'updated', 'updated', 'ended'], // the blip ended nothing; the real end (answers run out) is reported once
      );
    });

    it('a confirming query that fails is reported as an error, never as ended', async () => {
      const events: WatchEvent[] = [];
      const errors: string[] = [];
      const answers: Array<ProgressRecord | null | Error> = [record(1000, '2026-11-22T10:00:02'), null, new ChargingError('HTTP', 'gateway said 502')];
      const w = new SessionWatcher(
        async () => {
          const a = answers.length > 0 ? answers.shift() : record(1000, '2026-11-22T10:00:02');
          if (a instanceof Error) throw a;
          return a as ProgressRecord | null;
        },
        { intervalMs: 1_000 },
        (e) => events.push(e),
        (_t, err) => errors.push(err.code),
      );
      w.watch(['T']);
      await clock.tickAsync(4_000);
      w.close();
      assert.deepEqual(events.map((e) => e.event), ['started']);
      assert.deepEqual(errors, ['HTTP']);
    });

    it('a listener that changes the session it was given (a function node editing msg.session) changes neither the saved state nor what ended carries', async () => {
      const events: WatchEvent[] = [];
      const states: Array<SavedState | undefined> = [];
      const queue: Array<ProgressRecord | null> = [record(1000, '2026-11-22T10:00:02'), record(1500, '2026-11-22T10:00:12')];
      // The state handed over is the watcher's own, updated in place later: a copy of each moment's.
      const w = new SessionWatcher(async () => queue.shift() ?? null, { intervalMs: 1_000, onState: (_t, s) => states.push(s && structuredClone(s)) }, (e) => {
        events.push(e);
        if (e.session && e.event !== 'ended') {
          e.session.meterEnd = -1;
          e.session.energyKWh = 999;
          e.session.transactionId = 'edited';
        }
      }, () => undefined);
      w.watch(['T']);
      await clock.tickAsync(4_010);
      w.close();
      assert.deepEqual(
        events.map((e) => e.event),
        ['started', 'updated', 'ended'],
      );
      const ended = events[2].session;
      assert.equal(ended?.meterEnd, 1500, 'ended carries the values polled, not the listener\'s edits');
      assert.equal(ended?.energyKWh, 0.5);
      assert.equal(ended?.transactionId, 'TX-1');
      assert.deepEqual(
        states.map((s) => (s ? `${s.meterEnd}:${s.session?.meterEnd}:${s.session?.transactionId}` : 'none')),
        ['1000:1000:TX-1', '1500:1500:TX-1', 'none'],
      );
    });

    it('keeps its values in one object per session, updated in place, and hands over one state object per session', async () => {
      const held: Array<SavedState | undefined> = [];
      const queue: Array<ProgressRecord | null> = [record(1000, '2026-11-22T10:00:02'), record(1500, '2026-11-22T10:00:12'), record(1700, '2026-11-22T10:00:22')];
      const sessions: WatchedSession[] = [];
      const w = new SessionWatcher(async () => queue.shift() ?? null, { intervalMs: 1_000, onState: (_t, s) => held.push(s) }, (e) => {
        if (e.session) sessions.push(e.session);
      }, () => undefined);
      w.watch(['T']);
      await clock.tickAsync(3_010);
      const [first, second, third] = held;
      assert.ok(first && first === second && second === third, 'the same state object for every change of one session');
      assert.equal(first.meterEnd, 1700);
      assert.equal(first.session?.meterEnd, 1700, 'a caller keeping it by reference sees the latest values');
      assert.equal(first.session?.updatedAt, '2026-11-22T10:00:22');
      assert.ok(!sessions.includes(first.session as WatchedSession), 'never the object an event carried');
      assert.deepEqual(
        sessions.map((x) => x.meterEnd),
        [1000, 1500, 1700],
        'each event keeps its own values',
      );
      w.close();
    });

    it('does not write to a session loaded from a saved state: the first poll keeps a copy of its own', async () => {
      const loaded: SavedState = { transactionId: 'TX-1', meterEnd: 1500, session: { transactionId: 'TX-1', meterEnd: 1500 } as WatchedSession };
      const before = structuredClone(loaded);
      const queue: Array<ProgressRecord | null> = [record(1600, '2026-11-22T10:01:22'), record(1700, '2026-11-22T10:01:32')];
      const states: Array<SavedState | undefined> = [];
      const w = new SessionWatcher(async () => queue.shift() ?? null, { intervalMs: 1_000, onState: (_t, s) => states.push(s) }, () => undefined, () => undefined);
      w.watch(['T'], () => loaded);
      await clock.tickAsync(2_010);
      w.close();
      assert.deepEqual(loaded, before, 'the loaded state and its session are as they were');
      assert.equal(states[0]?.session?.meterEnd, 1700);
      assert.notEqual(states[0], loaded);
    });

    it('a new transaction for the same token between polls is ended + started', async () => {
      const events = await eventsFor([record(1000, '2026-11-22T10:00:02', 'TX-1'), record(1000, '2026-11-22T11:00:02', 'TX-2')]);
      assert.deepEqual(
        events.map((e) => `${e.event}:${e.session?.transactionId}`),
        ['started:TX-1', 'ended:TX-1', 'started:TX-2', 'ended:TX-2'],
      );
    });

    it('estimates power from successive readings by the record clock, and keeps the last estimate on a repeat', async () => {
      const events = await eventsFor([record(1000, '2026-11-22T10:00:00'), record(1000 + 11_000 / 60, '2026-11-22T10:01:00'), record(1000 + 11_000 / 60, '2026-11-22T10:01:00')], true);
      const [, up, repeat] = events;
      assert.equal(up.session?.powerKW, 11); // 11 kW for one minute, in Wh
      assert.equal(up.session?.energyKWh, 0.183);
      assert.equal(repeat.session?.powerKW, 11);
    });

    it('estimates power over ten seconds of readings, so a meter counting whole Wh polled every second reads 11 kW, not 14.4', async () => {
      // 11 kW polled every second: the meter moves 3 or 4 Wh between two polls.
      const answers = Array.from({ length: 25 }, (_, i) => record(1000 + Math.floor((11_000 * i) / 3600), `2026-11-22T10:00:${String(i).padStart(2, '0')}`));
      const events = await eventsFor(answers);
      const kw = events.filter((e) => e.event !== 'ended').map((e) => e.session?.powerKW ?? null);
      assert.equal(kw.length, 25);
      for (const [i, p] of kw.entries()) {
        if (i < 10) continue; // until ten seconds have been seen the estimate is over what there is
        assert.ok(p !== null && Math.abs(p - 11) <= 0.4, `reading ${i}: ${p} kW`);
      }
    });

    it('gives no power for a meter that went backwards', async () => {
      const events = await eventsFor([record(5000, '2026-11-22T10:00:00'), record(4000, '2026-11-22T10:01:00')]);
      assert.equal(events[1].session?.powerKW, null);
    });

    it('a listener that throws is reported as an error for that token, not thrown into the timer', async () => {
      const errors: ChargingError[] = [];
      const w = new SessionWatcher(
        async () => record(1000, '2026-11-22T10:00:00'),
        { intervalMs: 1_000 },
        () => {
          throw new RangeError('Maximum call stack size exceeded');
        },
        (_t, e) => errors.push(e),
      );
      w.watch(['T']);
      await clock.tickAsync(1_500);
      w.close();
      assert.equal(errors.length, 1);
      assert.equal(errors[0].code, 'INTERNAL');
      assert.match(errors[0].message, /Could not pass on the "started" event for T: Maximum call stack/);
    });
  });

  describe('state kept across restarts', () => {
    /** A watcher started with `saved` for token T, its polls answering `answers` in turn (then null). */
    async function resumed(saved: SavedState, answers: Array<ProgressRecord | null>): Promise<{ events: WatchEvent[]; states: Array<SavedState | undefined> }> {
      const events: WatchEvent[] = [];
      const states: Array<SavedState | undefined> = [];
      const queue = [...answers];
      const w = new SessionWatcher(
        async () => (queue.length > 0 ? (queue.shift() as ProgressRecord | null) : null),
        { intervalMs: 1_000, onState: (_t, s) => states.push(s && structuredClone(s)) },
        (e) => events.push(e),
        () => undefined,
      );
      w.watch(['T'], (t) => (t === 'T' ? saved : undefined));
      await clock.tickAsync(answers.length * 1_000 + 10);
      w.close();
      return { events, states };
    }
    const last = (meterEnd: number, tx = 'TX-1'): SavedState => ({ transactionId: tx, meterEnd, session: { transactionId: tx, meterEnd } as WatchedSession });

    it('an unchanged session reports nothing, a moved meter updated, a missing one ended once with the kept session', async () => {
      const { events, states } = await resumed(last(1500), [record(1500, '2026-11-22T10:01:12'), record(1600, '2026-11-22T10:01:22'), null, null]);
      assert.deepEqual(
        events.map((e) => e.event),
        ['updated', 'ended'],
      );
      assert.equal(events[1].session?.meterEnd, 1600);
      assert.deepEqual(
        states.map((s) => s?.meterEnd ?? null),
        [1600, null],
        'a state per change, none for a poll that changed nothing',
      );
    });

    it('a session that ended while down is ended once with the values kept; a new transaction is ended + started', async () => {
      const gone = await resumed(last(1500), [null, null]);
      assert.deepEqual(
        gone.events.map((e) => `${e.event}:${e.session?.meterEnd}`),
        ['ended:1500'],
      );
      const next = await resumed(last(1500), [record(1000, '2026-11-22T11:00:00', 'TX-2')]);
      assert.deepEqual(
        next.events.slice(0, 2).map((e) => `${e.event}:${e.session?.transactionId}`),
        ['ended:TX-1', 'started:TX-2'],
      );
    });
  });

  describe('scheduling', () => {
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
      w.watch(Array.from({ length: 100 }, (_, i) => `T${i}`));
      await clock.tickAsync(30_000);
      const perToken = new Map<string, number>();
      for (const p of polls) perToken.set(p.token, (perToken.get(p.token) ?? 0) + 1);
      assert.equal(perToken.size, 100);
      for (const n of perToken.values()) assert.ok(n >= 2 && n <= 4, `polled ${n} times in 3 intervals`);
      // Even: no second of the run sees more than a fifth of the polls.
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
      w.watch(['T']);
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
      w.watch(['T']);
      await clock.tickAsync(5_000);
      assert.equal(errors.length, 1);
      fail = false;
      await clock.tickAsync(2_000);
      fail = true;
      await clock.tickAsync(2_000);
      assert.equal(errors.length, 2);
      w.close();
    });

    it('ticks four polls at a time when polls come often, never slower than the interval, within [20 ms, 1 s]', () => {
      assert.equal(POLLS_PER_TICK, 4);
      assert.equal(watchTickMs(10_000, 100), 400, '100 tokens at 10 s: four every 400 ms');
      assert.equal(watchTickMs(10_000, 1_000), 40);
      assert.equal(watchTickMs(10_000, 10_000), 20, 'the floor: 20 polls per tick');
      assert.equal(watchTickMs(200, 1), 200, 'one token: one tick per interval, not four intervals');
      assert.equal(watchTickMs(300, 2), 300);
      assert.equal(watchTickMs(10_000, 2), 1_000, 'at least one tick a second');
    });

    it('a single token at a short interval is polled once per interval', async () => {
      const polls: number[] = [];
      const w = new SessionWatcher(async () => (polls.push(Date.now()), null), { intervalMs: 200 }, () => undefined, () => undefined);
      w.watch(['A']);
      await clock.tickAsync(2_000);
      w.close();
      assert.ok(polls.length >= 9 && polls.length <= 11, `${polls.length} polls in 2 s at 200 ms`);
    });

    it('calls onTick on every tick, at least once a second while it watches, and never after close', async () => {
      let ticks = 0;
      const w = new SessionWatcher(async () => null, { intervalMs: 60_000, onTick: () => void ticks++ }, () => undefined, () => undefined);
      w.watch(['A']);
      await clock.tickAsync(5_000);
      assert.ok(ticks >= 5 && ticks <= 7, `${ticks} ticks in 5 s of one token at 60 s`);
      assert.equal(clock.countTimers(), 1, 'onTick rides on the tick timer');
      w.close();
      const n = ticks;
      await clock.tickAsync(5_000);
      assert.equal(ticks, n);
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
      w.watch(['A', 'B']);
      await clock.tickAsync(2_000);
      assert.equal(w.unwatch(['A']), 1);
      const afterUnwatch = polls.length;
      await clock.tickAsync(3_000);
      assert.ok(polls.slice(afterUnwatch).every((t) => t === 'B'));
      assert.ok(polls.length - afterUnwatch >= 2, 'B is still polled');
      assert.deepEqual(w.tokens(), ['B']);
      w.close();
      const n = polls.length;
      await clock.tickAsync(10_000);
      assert.equal(polls.length, n);
      assert.equal(clock.countTimers(), 0);
    });

    it('adding and removing N tokens is linear: 200 000 at once, then half of them, with no per-token splice or search (counted, not timed)', () => {
      // Counted, not timed: the work per token is constant, so a quadratic pass shows in the calls to Array methods.
      const w = new SessionWatcher(async () => null, { intervalMs: 10_000 }, () => undefined, () => undefined);
      const tokens = Array.from({ length: 200_000 }, (_, i) => `T${i}`);
      const splice = sinon.spy(Array.prototype, 'splice');
      const indexOf = sinon.spy(Array.prototype, 'indexOf');
      try {
        assert.equal(w.watch(tokens), 200_000);
        assert.equal(w.watch(tokens.slice(0, 10)), 0, 'already watched');
        assert.equal(w.unwatch(tokens.filter((_, i) => i % 2 === 0)), 100_000);
        assert.equal(splice.callCount + indexOf.callCount, 0, 'no per-token splice or search');
      } finally {
        splice.restore();
        indexOf.restore();
      }
      assert.equal(w.size, 100_000);
      assert.equal(w.tokens().length, 100_000);
      assert.equal(w.tokens()[0], 'T1');
      w.close();
    });
  });
});
