/**
 * charging-control's view of a target, over any sequence of wishes, progress
 * answers and time (issue 36): answers that cannot be read change nothing, a
 * restart from the kept state changes nothing, a START goes out only when no
 * session is seen and never while an earlier one may still be on its way, and
 * a STOP only names the transaction progress shows, sent again only when a
 * query after its wait still shows it. The rules are run exactly as the
 * controller runs them (observe, decide, noteSent), with every command taken
 * as accepted.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type ControlMemory, emptyMemory, fromKept, toKept } from '../../../nodes/lib/control/memory';
import { applyWish, decide, noteSent, observe } from '../../../nodes/lib/control/reconcile';
import type { ProgressView } from '../../../nodes/lib/control/view';
import { controlSettings } from './settings';

type Step =
  | { k: 'wish'; on: boolean; force: boolean; restart: boolean }
  | { k: 'view'; v: 'none' | 'pending' | 'A' | 'B' | 'C' | 'unreadable' }
  | { k: 'wait'; ms: number }
  | { k: 'restart' };

interface Sent {
  action: 'START' | 'STOP';
  tx?: string;
  /** time since the start of the run, ms */
  at: number;
  /** index of the step (a view) it was decided at */
  step: number;
}

const S = controlSettings({ guardMs: 10_000, confirmMs: 1_000, waitMs: 5_000, retryMs: 20_000 });
const TARGET = { locationId: 'L', evseId: '1', token: 'T' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ k: fc.constant('wish' as const), on: fc.boolean(), force: fc.boolean(), restart: fc.boolean() }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('view' as const), v: fc.constantFrom('none' as const, 'pending' as const, 'A' as const, 'B' as const, 'C' as const, 'unreadable' as const) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('wait' as const), ms: fc.constantFrom(500, 1_000, 3_000, 6_000, 12_000) }) },
  { weight: 1, arbitrary: fc.constant<Step>({ k: 'restart' }) },
);

function viewFor(v: Extract<Step, { k: 'view' }>['v']): ProgressView {
  if (v === 'none') return { kind: 'none' };
  if (v === 'pending') return { kind: 'pending' };
  if (v === 'unreadable') return { kind: 'unreadable', why: 'the service answered 503' };
  return { kind: 'active', transactionId: `TX-${v}` };
}

/**
 * The rules over the steps. A restart keeps the memory as a store does (JSON,
 * wall-clock times) and takes it up in a process whose monotonic clock starts
 * at 0 again.
 */
function run(steps: Step[]): { sent: Sent[]; states: Array<string | null> } {
  let m: ControlMemory = emptyMemory();
  let t = 0; // time since the start of the run
  let origin = 0; // where this process's monotonic clock starts
  const wall0 = 1_790_000_000_000;
  const sent: Sent[] = [];
  const states: Array<string | null> = [];
  steps.forEach((step, i) => {
    const now = t - origin;
    if (step.k === 'wait') t += step.ms;
    else if (step.k === 'wish') applyWish(m, step.on, { force: step.force, restart: step.restart }, now, S);
    else if (step.k === 'restart') {
      const kept = JSON.parse(JSON.stringify(toKept(TARGET, m, { now, wall: wall0 + t }))) as unknown;
      origin = t;
      const back = fromKept(kept, { now: 0, wall: wall0 + t });
      // Before the first wish nothing is kept (the node keeps a target once it has one).
      if (back) m = back.memory;
      else assert.equal(m.wanted, null, 'a kept target that has a wish comes back');
    } else {
      const view = viewFor(step.v);
      observe(m, view, now, S);
      const d = decide(m, view, now, S);
      states.push(d && `${d.state}|${d.reason}`);
      if (d?.send) {
        const tx = d.send.action === 'STOP' ? d.send.transactionId : undefined;
        noteSent(m, d.send.action, now, tx);
        sent.push({ action: d.send.action, tx, at: t, step: i });
      }
    }
  });
  return { sent, states };
}

const steps = fc.array(stepArb, { maxLength: 40 });

/** The steps with the latest wish sent again after each marked step (an MQTT publisher repeating its value). */
function withRepeats(s: Step[], marks: boolean[]): Step[] {
  const out: Step[] = [];
  let latest: Step | undefined;
  s.forEach((step, i) => {
    out.push(step);
    // msg.force and msg.restart are button presses: pressed again they act again (test/lib/control/attack.test.ts).
    if (step.k === 'wish') latest = step.force || step.restart ? undefined : step;
    if (marks[i % marks.length] && latest) out.push({ ...latest });
  });
  return out;
}

describe("charging-control's view of a target, over any sequence of wishes, answers and time (fast-check)", () => {
  it('a restart from the kept state changes nothing: the same commands at the same moments, the same states', () => {
    fc.assert(
      fc.property(steps, (s) => {
        const plain = (r: ReturnType<typeof run>) => ({ sent: r.sent.map(({ action, tx, at }) => ({ action, tx, at })), states: r.states });
        assert.deepEqual(plain(run(s)), plain(run(s.filter((x) => x.k !== 'restart'))));
      }),
      { numRuns: 400, seed: 34 },
    );
  });

  it('answers that cannot be read change nothing', () => {
    fc.assert(
      fc.property(steps, (s) => {
        const readable = s.filter((x) => !(x.k === 'view' && x.v === 'unreadable'));
        const all = run(s);
        const without = run(readable);
        assert.deepEqual(
          all.sent.map(({ action, tx, at }) => ({ action, tx, at })),
          without.sent.map(({ action, tx, at }) => ({ action, tx, at })),
        );
        assert.deepEqual(all.states.filter((x) => x !== null), without.states);
      }),
      { numRuns: 400, seed: 3436 },
    );
  });

  it('START only when no session is seen, never while one may be on its way; STOP only of the transaction seen, again only on evidence after its wait', () => {
    fc.assert(
      fc.property(steps, (s) => {
        const { sent } = run(s);
        sent.forEach((c, i) => {
          const view = (s[c.step] as Extract<Step, { k: 'view' }>).v;
          if (c.action === 'START') {
            assert.equal(view, 'none', `START ${i} decided on "${view}"`);
            const before = sent.slice(0, i).filter((p) => p.action === 'START').at(-1);
            if (before) {
              // Seen a session since, or no session a whole wait after that START.
              const sessionSince = s.slice(before.step + 1, c.step).some((x) => x.k === 'view' && /^[ABC]$/.test(x.v));
              assert.ok(sessionSince || c.at - before.at >= S.waitMs, `a second START ${c.at - before.at} ms after the first, with no session seen between`);
            }
          } else {
            assert.equal(`TX-${view}`, c.tx, `STOP ${i} names ${String(c.tx)} while progress shows "${view}"`);
            const same = sent.slice(0, i).filter((p) => p.action === 'STOP' && p.tx === c.tx).at(-1);
            if (same) assert.ok(c.at - same.at >= S.waitMs, `STOP of ${String(c.tx)} again after ${c.at - same.at} ms, before its wait was over`);
          }
        });
      }),
      { numRuns: 400, seed: 3634 },
    );
  });

  it('the guard: a START follows a STOP (and a STOP a START, unless forced) by at least the guard time', () => {
    fc.assert(
      fc.property(steps, (s) => {
        const { sent } = run(s);
        for (let i = 1; i < sent.length; i++) {
          const [a, b] = [sent[i - 1], sent[i]];
          if (a.action === b.action) continue;
          const forced = b.action === 'STOP' && s.slice(a.step, b.step).some((x) => x.k === 'wish' && !x.on && x.force);
          if (!forced) assert.ok(b.at - a.at >= S.guardMs, `${b.action} ${b.at - a.at} ms after ${a.action}`);
        }
      }),
      { numRuns: 300, seed: 343 },
    );
  });

  it('a repeated identical wish never yields a command nor changes a state, in any state (failed and busy included; msg.force and msg.restart are presses, not states)', () => {
    fc.assert(
      fc.property(steps, fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }), (s, marks) => {
        const plain = (r: ReturnType<typeof run>) => ({ sent: r.sent.map(({ action, tx, at }) => ({ action, tx, at })), states: r.states });
        assert.deepEqual(plain(run(withRepeats(s, marks))), plain(run(s)));
      }),
      { numRuns: 400, seed: 41 },
    );
  });

  it('whatever the input does (repeats, flips, restarts of the process): at most startAttempts STARTs that bring no session in any retryInterval', () => {
    // The car unplugged (no session ever), a flapping or repeating input, and time passing.
    const unplugged: fc.Arbitrary<Step> = fc.oneof(
      { weight: 1, arbitrary: stepArb },
      { weight: 4, arbitrary: fc.record({ k: fc.constant('wish' as const), on: fc.boolean(), force: fc.constant(false), restart: fc.constant(false) }) },
      { weight: 4, arbitrary: fc.constant<Step>({ k: 'view', v: 'none' }) },
      { weight: 3, arbitrary: fc.constant<Step>({ k: 'wait', ms: 3_000 }) },
    );
    const flappy = fc.array(unplugged, { minLength: 20, maxLength: 80 });
    fc.assert(
      fc.property(flappy, (s) => {
        const starts = run(s).sent.filter((c) => c.action === 'START');
        // A session seen between two STARTs: the car was plugged in, and the guard bounds those.
        const sessionBetween = (a: number, b: number) => s.slice(a, b).some((x) => x.k === 'view' && /^[ABC]$/.test(x.v));
        starts.forEach((c, i) => {
          const inWindow = starts.slice(0, i + 1).filter((p) => c.at - p.at < S.retryMs && !sessionBetween(p.step, c.step)).length;
          assert.ok(inWindow <= S.startAttempts, `${inWindow} STARTs with no session between them within ${S.retryMs} ms up to ${c.at} ms`);
        });
      }),
      { numRuns: 400, seed: 4141 },
    );
  });
});
