/**
 * One charging-service configuration's metrics: what its ServiceClient and
 * its watch nodes tell (ClientMetrics, WatchMetrics), kept as plain numbers
 * (a counter is an array cell, a histogram a Tally), and the readers its
 * nodes register for a scrape. prom-client reads them at scrape time
 * (definitions.ts): a request costs an increment and an observation and
 * nothing else (in place, prom-client's own inc and observe with their label
 * hashing cost a query 3 % of its CPU, measured side by side). Closed, it
 * counts and reads nothing more, and the next scrape no longer sees it: its
 * series leave with it.
 */
import type { ChargingErrorCode } from '../errors';
import type { WatchEventKind } from '../session/tracker';
import type { FigureKind, Figures } from './figures';
import { ERROR_CODES, REQUEST_KINDS, WATCH_EVENTS } from './labels';
import type { ClientMetrics, RequestKind, WatchMetrics } from './observers';

/** Seconds: a message's whole journey is bounded by 30 s (DEFAULT_RETRY.maxTotalMs). */
export const DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
export const WAIT_BUCKETS: readonly number[] = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const indexOf = <T extends string>(list: readonly T[]) => Object.fromEntries(list.map((v, i) => [v, i])) as Record<T, number>;
export const KIND = indexOf(REQUEST_KINDS);
export const CODE = indexOf(ERROR_CODES);
export const EVENT = indexOf(WATCH_EVENTS);
/** A kind's row in `requests`: cell 0 answered, cell 1 + CODE[code] ended with that code. */
export const ROW = 1 + ERROR_CODES.length;

/** A histogram's observations: per bucket (not cumulative), their sum and count. */
export class Tally {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    const v = value > 0 ? value : 0;
    this.sum += v;
    this.count++;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]) {
        this.counts[i]++;
        return;
      }
    }
  }
}

type Readers = { [K in FigureKind]: Set<() => Figures[K]> };

export class ConfigurationMetrics implements ClientMetrics, WatchMetrics {
  /** per kind a row: answered, then by error code */
  readonly requests = new Float64Array(REQUEST_KINDS.length * ROW);
  readonly durations = REQUEST_KINDS.map(() => new Tally(DURATION_BUCKETS));
  readonly retries = new Float64Array(REQUEST_KINDS.length);
  readonly throttles = new Float64Array(REQUEST_KINDS.length);
  readonly budgetWait = new Tally(WAIT_BUCKETS);
  readonly tokenFailures = new Float64Array(ERROR_CODES.length);
  readonly events = new Float64Array(WATCH_EVENTS.length);
  renewals = 0;
  private closed = false;
  private readonly readers: Readers = { watch: new Set(), control: new Set(), coordination: new Set(), depot: new Set() };

  constructor(
    /** the value of the `config` label */
    readonly label: string,
    private readonly onClose: (self: ConfigurationMetrics) => void,
  ) {}

  get isClosed(): boolean {
    return this.closed;
  }

  finished(kind: RequestKind, code: ChargingErrorCode | null, seconds: number): void {
    if (this.closed) return;
    const k = KIND[kind];
    this.requests[k * ROW + (code === null ? 0 : 1 + (CODE[code] ?? CODE.INTERNAL))]++;
    this.durations[k].observe(seconds);
  }

  retried(kind: RequestKind): void {
    if (!this.closed) this.retries[KIND[kind]]++;
  }

  throttled(kind: RequestKind): void {
    if (!this.closed) this.throttles[KIND[kind]]++;
  }

  budgetWaited(seconds: number): void {
    if (!this.closed) this.budgetWait.observe(seconds);
  }

  renewed(): void {
    if (!this.closed) this.renewals++;
  }

  failed(code: ChargingErrorCode): void {
    if (!this.closed) this.tokenFailures[CODE[code] ?? CODE.INTERNAL]++;
  }

  emitted(event: WatchEventKind): void {
    const e = EVENT[event];
    if (!this.closed && e !== undefined) this.events[e]++;
  }

  /** A node's figures, read at every scrape until the returned function is called (its node's close). */
  read<K extends FigureKind>(kind: K, reader: () => Figures[K]): () => void {
    if (this.closed) return () => undefined;
    const set = this.readers[kind] as Set<() => Figures[K]>;
    set.add(reader);
    return () => void set.delete(reader);
  }

  /** Each reader of a kind, once: its figures, or null for the kind when any reader throws (a figure that cannot be read is left out). */
  figures<K extends FigureKind>(kind: K): Array<Figures[K]> | null {
    const out: Array<Figures[K]> = [];
    for (const reader of this.readers[kind] as Set<() => Figures[K]>) {
      try {
        const f = reader();
        if (f && typeof f === 'object') out.push(f);
      } catch {
        return null;
      }
    }
    return out;
  }

  /** The configuration closed: nothing more is counted or read, and the next scrape no longer sees it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const set of Object.values(this.readers)) set.clear();
    this.onClose(this);
  }
}
