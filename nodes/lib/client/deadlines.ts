/**
 * Time limits and cancellation for everything the client waits on, built so
 * that the common case costs next to nothing:
 *
 * - DeadlineTimer: one timer per client for every bounded wait (exchanges on the
 *   wire, queued messages, token waits, back-off pauses), instead of a timer per
 *   request. Items are kept in a Set; the timer is armed for the earliest
 *   deadline and, when it fires, expires what is due and re-arms for the next.
 *   Items that finish early are simply removed; the timer is not touched.
 * - Exchange: one HTTP exchange, passed to axios as its `signal` (axios accepts
 *   any object with `aborted` and add/removeEventListener). Creating one is a
 *   plain allocation; an AbortController per request cost 30-50 % more CPU.
 * - CancelRegistry: one 'abort' listener per caller signal (one per node), not
 *   one per request; aborting the signal cancels everything registered on it.
 */
import { ChargingError } from '../errors';
import { monotonicNow } from '../clock';

/** Something with a deadline that the DeadlineTimer ends when it is due. */
export interface Timed {
  readonly deadline: number;
  expire(): void;
}

/** Something a caller's abort signal can end. */
export interface Cancellable {
  cancel(): void;
}

export class DeadlineTimer {
  private readonly items = new Set<Timed>();
  private timer: NodeJS.Timeout | null = null;
  private armedFor = Infinity;

  constructor(private readonly now: () => number = monotonicNow) {}

  add(item: Timed): void {
    this.items.add(item);
    if (item.deadline < this.armedFor) this.arm(item.deadline);
  }

  /** Forget an item that finished; the timer may later fire with nothing due, which is cheap. */
  delete(item: Timed): void {
    this.items.delete(item);
  }

  /** What is still waiting, for close(). */
  pending(): Timed[] {
    return [...this.items];
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.armedFor = Infinity;
    this.items.clear();
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.fire(), Math.max(1, at - this.now()));
    // The sockets and timers of the work itself keep the process alive, not this one.
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = null;
    this.armedFor = Infinity;
    const now = this.now();
    let next = Infinity;
    for (const item of this.items) {
      if (item.deadline <= now) {
        this.items.delete(item);
        item.expire();
      } else if (item.deadline < next) {
        next = item.deadline;
      }
    }
    if (next !== Infinity) this.arm(next);
  }
}

export type ExchangeEnd = 'deadline' | 'closed' | 'cancelled';

/** One HTTP exchange in flight; axios's `signal` for it. */
export class Exchange implements Timed, Cancellable {
  aborted = false;
  /** why it was aborted */
  ended: ExchangeEnd | null = null;
  private listener: (() => void) | null = null;

  constructor(
    readonly deadline: number,
    /** ms the exchange was given, for messages */
    readonly allowedMs: number,
  ) {}

  addEventListener(_type: string, listener: () => void): void {
    this.listener = listener;
  }

  removeEventListener(): void {
    this.listener = null;
  }

  expire(): void {
    this.abort('deadline');
  }

  cancel(): void {
    this.abort('cancelled');
  }

  abort(why: ExchangeEnd): void {
    if (this.aborted) return;
    this.aborted = true;
    this.ended = why;
    const listener = this.listener;
    this.listener = null;
    listener?.();
  }
}

/**
 * A promise that settles when its work does, or rejects when its deadline passes
 * or its caller aborts; `cleanup` undoes whatever the wait set up (a queue place,
 * a back-off timer).
 */
export class Wait<T> implements Timed, Cancellable {
  readonly promise: Promise<T>;
  private settle!: { resolve: (v: T) => void; reject: (e: Error) => void };
  private done = false;
  cleanup: (() => void) | null = null;

  /**
   * @param onExpire the error at the deadline, or null for a pause that simply ends then
   * @param onCancel the error when the caller aborts or the client closes
   */
  constructor(
    readonly deadline: number,
    private readonly onExpire: () => ChargingError | null,
    private readonly onCancel: () => ChargingError,
  ) {
    this.promise = new Promise<T>((resolve, reject) => (this.settle = { resolve, reject }));
  }

  resolve(value: T): void {
    if (this.finish()) this.settle.resolve(value);
  }

  reject(err: Error): void {
    if (this.finish()) this.settle.reject(err);
  }

  expire(): void {
    const err = this.onExpire();
    if (err) this.reject(err);
    else this.resolve(undefined as T);
  }

  cancel(): void {
    this.reject(this.onCancel());
  }

  get settled(): boolean {
    return this.done;
  }

  private finish(): boolean {
    if (this.done) return false;
    this.done = true;
    const c = this.cleanup;
    this.cleanup = null;
    c?.();
    return true;
  }
}

export class CancelRegistry {
  private readonly bySignal = new WeakMap<AbortSignal, Set<Cancellable>>();

  /** False when the signal has already fired: the caller should not start the work. */
  add(signal: AbortSignal, item: Cancellable): boolean {
    if (signal.aborted) return false;
    let set = this.bySignal.get(signal);
    if (!set) {
      const items = new Set<Cancellable>();
      set = items;
      this.bySignal.set(signal, items);
      signal.addEventListener(
        'abort',
        () => {
          for (const item of [...items]) item.cancel();
          items.clear();
        },
        { once: true },
      );
    }
    set.add(item);
    return true;
  }

  delete(signal: AbortSignal, item: Cancellable): void {
    this.bySignal.get(signal)?.delete(item);
  }
}

/**
 * The client's one way to bound and cancel: every Wait and Exchange is
 * registered here for its deadline, its caller's signal, and the client's close.
 */
export class Waits {
  private readonly timer: DeadlineTimer;
  private readonly cancels = new CancelRegistry();
  private readonly open = new Set<Wait<unknown>>();
  private readonly exchanges = new Set<Exchange>();
  private drained: (() => void) | null = null;

  constructor(readonly now: () => number = monotonicNow) {
    this.timer = new DeadlineTimer(now);
  }

  /**
   * A Wait registered for its deadline and for `signal` (a caller's abort);
   * `onEnd` runs however it ends. Already cancelled if the signal has fired.
   */
  begin<T>(deadline: number, onExpire: () => ChargingError | null, onCancel: () => ChargingError, signal?: AbortSignal, onEnd?: () => void): Wait<T> {
    const wait = new Wait<T>(deadline, onExpire, onCancel);
    this.timer.add(wait);
    this.open.add(wait as Wait<unknown>);
    wait.cleanup = () => {
      this.timer.delete(wait);
      this.open.delete(wait as Wait<unknown>);
      if (signal) this.cancels.delete(signal, wait);
      onEnd?.();
    };
    if (signal && !this.cancels.add(signal, wait)) wait.cancel();
    return wait;
  }

  /** A pause of `ms` that a caller's abort or the client's close ends early (rejecting). */
  sleep(ms: number, onCancel: () => ChargingError, signal?: AbortSignal): Promise<void> {
    return this.begin<void>(this.now() + ms, () => null, onCancel, signal).promise;
  }

  /** An exchange given `allowedMs`, cut when its deadline passes or (when `signal` is given) when its caller aborts. */
  exchange(allowedMs: number, signal?: AbortSignal): Exchange {
    const ex = new Exchange(this.now() + allowedMs, allowedMs);
    this.timer.add(ex);
    this.exchanges.add(ex);
    if (signal && !this.cancels.add(signal, ex)) ex.cancel();
    return ex;
  }

  finished(ex: Exchange, signal?: AbortSignal): void {
    this.timer.delete(ex);
    this.exchanges.delete(ex);
    if (signal) this.cancels.delete(signal, ex);
    if (this.exchanges.size === 0 && this.drained) this.drained();
  }

  /**
   * Close: every wait is cancelled at once; exchanges on the wire get up to
   * graceMs to finish (a START half-sent is better finished than cut), then are cut.
   */
  async close(graceMs: number): Promise<void> {
    for (const w of [...this.open]) w.cancel();
    if (graceMs > 0 && this.exchanges.size > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, graceMs);
        this.drained = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.drained = null;
    }
    for (const ex of [...this.exchanges]) ex.abort('closed');
    this.timer.close();
  }
}
