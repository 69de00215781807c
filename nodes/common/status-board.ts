/**
 * One node's badge on the screen: a board per node coalesces updates and
 * shows them in the language of the node's runtime. Under load a node may
 * change state thousands of times a second; Node-RED queues every update for
 * every editor connection, so the board shows at most one update per
 * STATUS_GAP_MS, always the latest, and the last state of a burst is never lost.
 */
import type { Node } from 'node-red';
import { monotonicNow } from '../lib/clock';
import type { NodeStatus } from './status';
import { inEnglish, Translate } from './status-language';

/** At most this many ms between two updates of one node's badge (4 per second). */
export const STATUS_GAP_MS = 250;
/**
 * A watch node's badge changes at most once a second: it reports an event per
 * poll, its clock shows whole seconds, and each delayed update is a wake-up of
 * the process of its own (four a second were one for every 2.5 polls of a node
 * watching 100 tokens at 10 s).
 */
export const WATCH_STATUS_GAP_MS = 1000;


/** HH:MM:SS local time. Not toTimeString(): that also formats the zone's name, on every badge a watch node shows, and a watch node shows one per poll. */
function clock(now: Date): string {
  return `${two(now.getHours())}:${two(now.getMinutes())}:${two(now.getSeconds())}`;
}

const two = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** One node's badge, coalesced. */
export class StatusBoard {
  private lastShown = -Infinity;
  private gapMs = STATUS_GAP_MS;
  private pending: NodeStatus | (() => NodeStatus) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  /** `translate`: the language of the node's runtime (NodeLifecycle passes its RED's); English without one. */
  constructor(
    private readonly node: Pick<Node, 'status'>,
    private readonly now: () => number = monotonicNow,
    private readonly translate: Translate = inEnglish,
  ) {}

  /**
   * The badge to show, or a function that makes it: called only when the board
   * shows it (a watch node reports an event per poll, its board shows one a second).
   */
  set(status: NodeStatus | (() => NodeStatus)): void {
    if (this.closed) return;
    const now = this.now();
    if (this.timer === null && now - this.lastShown >= this.gapMs) {
      this.show(status, now);
      return;
    }
    // Too soon: keep only the latest, and show it when the gap has passed.
    this.pending = status;
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.gapMs - (now - this.lastShown));
      this.timer.unref?.();
    }
  }

  /**
   * Like set(), but arms no timer when it is too soon: the badge waits for the
   * next set() or due(). A watch node calls due() on each tick of its watcher
   * (at least once a second while it watches anything), so its badge costs no
   * wake-up of the process of its own: the timer set() arms was 0.1 wake-ups
   * per poll at 100 tokens. Only for a caller that calls due().
   */
  defer(status: NodeStatus | (() => NodeStatus)): void {
    if (this.closed) return;
    const now = this.now();
    if (this.timer === null && now - this.lastShown >= this.gapMs) return this.show(status, now);
    this.pending = status;
  }

  /** Shows a deferred badge once the gap has passed (a pending set() has its own timer). */
  due(): void {
    if (this.pending !== null && this.timer === null && this.now() - this.lastShown >= this.gapMs) this.flush();
  }

  /** At most one update per `ms` from now on (a watch node: see WATCH_STATUS_GAP_MS). */
  setGap(ms: number): void {
    this.gapMs = ms;
  }

  /** Clears the badge and stops; nothing is shown afterwards. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
    this.node.status({});
  }

  private flush(): void {
    this.timer = null;
    const status = this.pending;
    this.pending = null;
    if (status && !this.closed) this.show(status, this.now());
  }

  private show(next: NodeStatus | (() => NodeStatus), now: number): void {
    this.lastShown = now;
    const { stamp, key, values, fill, shape, words } = typeof next === 'function' ? next() : next;
    if (key === undefined) return this.node.status({ fill, shape });
    const all = words ? { ...values } : values;
    for (const [name, word] of Object.entries(words ?? {})) (all as Record<string, string>)[name] = this.translate(word).trim();
    const text = this.translate(key, all).trim().replace(/\s{2,}/g, ' ');
    this.node.status({ fill, shape, text: stamp ? `${text} · ${clock(new Date())}` : text });
  }
}
