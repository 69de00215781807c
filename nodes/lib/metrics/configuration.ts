/**
 * One charging-service configuration's metrics: what its ServiceClient and
 * its watch nodes tell (ClientMetrics, WatchMetrics) as series labelled with
 * the configuration, and the readers its nodes register for a scrape. Label
 * objects are built once, here, so a request costs its counter increment and
 * histogram observation and nothing else. Closed, it counts nothing more (a
 * request that ends during the close grace is not counted) and reads nothing.
 */
import type { ChargingErrorCode } from '../errors';
import type { WatchEventKind } from '../session/tracker';
import type { Instruments, Labels } from './definitions';
import type { FigureKind, Figures } from './figures';
import { ERROR_CODES, REQUEST_KINDS, WATCH_EVENTS } from './labels';
import type { ClientMetrics, RequestKind, WatchMetrics } from './observers';

type ByKind<T> = Record<RequestKind, T>;
type Readers = { [K in FigureKind]: Set<() => Figures[K]> };

/** Every label set a configuration's instruments can have: built once, used per request, and taken out of the registry at the end. */
export function labelSets(config: string) {
  const perKind = <T>(f: (kind: RequestKind) => T) => Object.fromEntries(REQUEST_KINDS.map((k) => [k, f(k)])) as ByKind<T>;
  const byCode = <T>(f: (code: ChargingErrorCode) => T) => Object.fromEntries(ERROR_CODES.map((c) => [c, f(c)])) as Record<ChargingErrorCode, T>;
  return {
    // A request its node or configuration abandoned (CLOSED, a redeploy) did not fail: it is "cancelled", not an error.
    requests: perKind((kind) => ({ ok: { config, kind, outcome: 'ok', code: 'none' }, error: byCode((code) => ({ config, kind, outcome: code === 'CLOSED' ? 'cancelled' : 'error', code })) })),
    kinds: perKind((kind) => ({ config, kind })),
    config: { config },
    tokenFailures: byCode((code) => ({ config, code })),
    events: Object.fromEntries(WATCH_EVENTS.map((event): [string, Labels] => [event, { config, event }])) as Record<WatchEventKind, Labels>,
  };
}

export class ConfigurationMetrics implements ClientMetrics, WatchMetrics {
  private closed = false;
  private readonly sets: ReturnType<typeof labelSets>;
  private readonly readers: Readers = { watch: new Set(), control: new Set(), coordination: new Set() };

  constructor(
    /** the value of the `config` label */
    readonly label: string,
    private readonly i: Instruments,
    private readonly onClose: (self: ConfigurationMetrics) => void,
  ) {
    this.sets = labelSets(label);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  finished(kind: RequestKind, code: ChargingErrorCode | null, seconds: number): void {
    if (this.closed) return;
    const r = this.sets.requests[kind];
    this.i.requests.inc(code === null ? r.ok : (r.error[code] ?? r.error.INTERNAL));
    this.i.duration.observe(this.sets.kinds[kind], seconds > 0 ? seconds : 0);
  }

  retried(kind: RequestKind): void {
    if (!this.closed) this.i.retries.inc(this.sets.kinds[kind]);
  }

  throttled(kind: RequestKind): void {
    if (!this.closed) this.i.throttled.inc(this.sets.kinds[kind]);
  }

  budgetWaited(seconds: number): void {
    if (!this.closed) this.i.budgetWait.observe(this.sets.config, seconds > 0 ? seconds : 0);
  }

  renewed(): void {
    if (!this.closed) this.i.renewals.inc(this.sets.config);
  }

  failed(code: ChargingErrorCode): void {
    if (!this.closed) this.i.tokenFailures.inc(this.sets.tokenFailures[code] ?? this.sets.tokenFailures.INTERNAL);
  }

  emitted(event: WatchEventKind): void {
    const labels = this.sets.events[event];
    if (!this.closed && labels) this.i.events.inc(labels);
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

  /** The configuration closed: nothing more is counted or read, and its series leave the registry (with the last configuration of its label). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const set of Object.values(this.readers)) set.clear();
    this.onClose(this);
  }
}

/** Takes every series of a configuration label out of the instruments. */
export function removeSeries(i: Instruments, label: string): void {
  const s = labelSets(label);
  for (const kind of REQUEST_KINDS) {
    i.requests.remove(s.requests[kind].ok);
    for (const code of ERROR_CODES) i.requests.remove(s.requests[kind].error[code]);
    i.duration.remove(s.kinds[kind]);
    i.retries.remove(s.kinds[kind]);
    i.throttled.remove(s.kinds[kind]);
  }
  i.budgetWait.remove(s.config);
  i.renewals.remove(s.config);
  for (const code of ERROR_CODES) i.tokenFailures.remove(s.tokenFailures[code]);
  for (const event of WATCH_EVENTS) i.events.remove(s.events[event]);
}
