/**
 * The lifecycle of a watched token, proven over any sequence of answers
 * (issue 36): every transaction seen gets exactly one `started` and, once it is
 * replaced or gone, exactly one `ended` with its last values; a pending session
 * that disappears ends once; answers that cannot be read change nothing; and
 * all of it holds across redeploys and restarts (a new watcher resumed from the
 * saved state). Driven through SessionWatcher itself (schedule, end
 * confirmation, saved state), on fake timers, against a model written from the
 * README's table rather than from the code.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import sinon from 'sinon';
import { ChargingError } from '../../../nodes/lib/errors';
import { transition } from '../../../nodes/lib/session/lifecycle';
import type { ProgressRecord } from '../../../nodes/lib/session/record';
import { SavedState, SessionWatcher, WatchEvent } from '../../../nodes/lib/session/watcher';

/** One answer of the service to a progress query. */
type Answer = { k: 'none' } | { k: 'unreadable' } | { k: 'pending' } | { k: 'tx'; id: string; meter: number };

/** What the model and the watcher are compared on. */
interface Seen {
  event: string;
  tx: string | null;
  meter: number | null;
}

const answerArb: fc.Arbitrary<Answer> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Answer>({ k: 'none' }) },
  { weight: 2, arbitrary: fc.constant<Answer>({ k: 'unreadable' }) },
  { weight: 2, arbitrary: fc.constant<Answer>({ k: 'pending' }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('tx' as const), id: fc.constantFrom('A', 'B', 'C'), meter: fc.constantFrom(1000, 1200, 1500) }) },
);

/**
 * The model, from the README's table: answers that cannot be read are skipped;
 * "no session" after a session ends it unless the very next readable answer
 * (the confirming query) shows the same session back (a blip); a transaction
 * never goes back to pending, so pending after a transaction is a new session.
 * The world stays as the last answer left it, so that answer is read once more.
 */
function model(answers: Answer[]): Seen[] {
  const seq = answers.filter((a) => a.k !== 'unreadable');
  if (seq.length > 0) seq.push(seq[seq.length - 1]);
  const out: Seen[] = [];
  let cur: { tx: string | null; meter: number | null } | null = null;
  const end = () => {
    if (cur) out.push({ event: 'ended', tx: cur.tx, meter: cur.meter });
    cur = null;
  };
  seq.forEach((a, i) => {
    if (a.k === 'none') {
      const next = seq[i + 1];
      const back = cur && next && next.k !== 'none' && (cur.tx === null || (next.k === 'tx' && next.id === cur.tx));
      if (!back) end();
      return;
    }
    const tx = a.k === 'tx' ? a.id : null;
    const meter = a.k === 'tx' ? a.meter : null;
    if (cur && cur.tx !== null && cur.tx !== tx) end(); // another transaction, or a new pending session
    if (!cur) out.push({ event: tx === null ? 'pending' : 'started', tx, meter });
    else if (cur.tx === null && tx !== null) out.push({ event: 'started', tx, meter });
    else if (tx !== null && meter !== cur.meter) out.push({ event: 'updated', tx, meter });
    cur = { tx, meter };
  });
  return out;
}

let at = 0;
function recordOf(a: Answer): ProgressRecord {
  at++;
  const r: ProgressRecord = { eventType: 'Updated', timestamp: new Date(Date.UTC(2026, 10, 22, 10, 0, at)).toISOString().slice(0, 19), createdAt: '2026-11-22T10:00:00Z', evseId: 1, tokenId: 'T', locationId: 'L' };
  if (a.k === 'tx') r.transactionData = { transactionId: a.id, cdrId: `cdr-${a.id}`, meterStart: 1000, meterEnd: a.meter };
  return r;
}

/**
 * Runs the answers through a watcher of token T polled every second, closing
 * it after the polls listed in `restarts` and resuming a new one from the state
 * it saved (as JSON, as a context store keeps it).
 */
async function watch(clock: sinon.SinonFakeTimers, answers: Answer[], restarts: number[]): Promise<Seen[]> {
  const seen: Seen[] = [];
  let i = 0;
  let polls = 0;
  let last: Answer = { k: 'none' };
  const poll = async (): Promise<ProgressRecord | null> => {
    polls++;
    // The script, then the world as it left it.
    const a = i < answers.length ? answers[i++] : last;
    if (a.k === 'unreadable') throw new ChargingError('HTTP', 'The service answered 503');
    last = a;
    return a.k === 'none' ? null : recordOf(a);
  };
  let kept: SavedState | undefined;
  const start = () => {
    const w = new SessionWatcher(
      poll,
      { intervalMs: 1_000, confirmEndMs: 100, onState: (_t, s) => void (kept = s) },
      (e: WatchEvent) => seen.push({ event: e.event, tx: e.session?.transactionId ?? null, meter: e.session?.meterEnd ?? null }),
      () => undefined,
    );
    // What a context store gives back after a restart: a copy, not the object the old watcher updates.
    const saved = kept && (JSON.parse(JSON.stringify(kept)) as SavedState);
    w.watch(['T'], () => saved);
    return w;
  };
  let w = start();
  const pending = [...restarts].sort((a, b) => a - b);
  // Long enough for every answer, the confirmations and the final look at the world as it stayed.
  for (let t = 0; t < answers.length * 2 + 4; t++) {
    await clock.tickAsync(1_000);
    if (pending.length > 0 && polls >= pending[0]) {
      pending.shift();
      w.close();
      w = start();
    }
  }
  w.close();
  return seen;
}

describe('the lifecycle of a watched token, over any sequence of answers (fast-check)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  it('transaction A, A, pending, B: started A, updated A, ended A (its last meter), pending, started B', async () => {
    const events = await watch(clock, [{ k: 'tx', id: 'A', meter: 1000 }, { k: 'tx', id: 'A', meter: 1200 }, { k: 'pending' }, { k: 'tx', id: 'B', meter: 1000 }], []);
    assert.deepEqual(events, [
      { event: 'started', tx: 'A', meter: 1000 },
      { event: 'updated', tx: 'A', meter: 1200 },
      { event: 'ended', tx: 'A', meter: 1200 },
      { event: 'pending', tx: null, meter: null },
      { event: 'started', tx: 'B', meter: 1000 },
    ]);
  });

  it('the watcher sends what the model says, with or without restarts, for 300 sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(answerArb, { maxLength: 24 }), fc.array(fc.integer({ min: 1, max: 30 }), { maxLength: 3 }), async (answers, restarts) => {
        const expected = model(answers);
        assert.deepEqual(await watch(clock, answers, []), expected, 'without a restart');
        assert.deepEqual(await watch(clock, answers, restarts), expected, `with restarts after polls ${restarts.join(', ')}`);
      }),
      { numRuns: 300, seed: 36 },
    );
  });

  it('in whatever the watcher sends, a session starts once and ends once, with its last values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(answerArb, { maxLength: 24 }), fc.array(fc.integer({ min: 1, max: 30 }), { maxLength: 3 }), async (answers, restarts) => {
        const events = await watch(clock, answers, restarts);
        let open: Seen | null = null; // the session begun and not ended, with its last values
        for (const e of events) {
          if (e.event === 'pending') {
            assert.equal(open, null, 'pending only when no session is open');
            open = { ...e };
          } else if (e.event === 'started') {
            assert.ok(open === null || open.tx === null, `started ${e.tx} while ${open?.tx} is open: its ended is missing`);
            open = { ...e };
          } else if (e.event === 'updated') {
            assert.ok(open !== null && open.tx === e.tx, 'updated belongs to the open transaction');
            open.meter = e.meter;
          } else if (e.event === 'ended') {
            assert.ok(open !== null, 'ended only for a session that began');
            assert.deepEqual({ tx: e.tx, meter: e.meter }, { tx: open.tx, meter: open.meter }, 'ended carries the last values');
            open = null;
          }
        }
        // Answers that cannot be read change nothing.
        assert.deepEqual(await watch(clock, answers.filter((a) => a.k !== 'unreadable'), []), await watch(clock, answers, []));
      }),
      { numRuns: 150, seed: 3636 },
    );
  });

  it('the table: "no session" ends only what was seen, and an unchanged answer sends nothing', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.option(fc.constantFrom('A', 'B')), fc.option(fc.constantFrom(1, 2)), (seen, tx, meter) => {
        const before = { seen, transactionId: seen ? tx : null, meterEnd: seen ? meter : null };
        assert.equal(transition(before, null).ends, seen);
        if (seen) assert.deepEqual({ ...transition(before, { transactionId: before.transactionId, meterEnd: before.meterEnd }) }, { ends: false, event: null });
      }),
      { seed: 361 },
    );
  });
});
