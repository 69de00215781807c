/**
 * The charging metrics of this process: one prom-client Registry of our own
 * (never prom-client's default one, which another package in the same
 * Node-RED may fill), created once, with every metric defined once. Node-RED
 * runs one runtime per process; redeploys and the test helper's many loads
 * create configurations again, never metrics, so "already registered" cannot
 * happen. A scrape reads the live configurations only: a closed one's series
 * are gone with it (two configurations of one name add up).
 */
import { Registry } from 'prom-client';
import { collected, kept } from './definitions';
import { FIGURE_KINDS, type Snapshot } from './figures';
import { ConfigurationMetrics } from './configuration';
import { configurationLabel } from './labels';

export type ScrapeFormat = 'text' | 'json';

export interface Scrape {
  /** the text exposition, or the same values as an object by metric name */
  body: string | Record<string, unknown>;
  contentType: string;
  /** samples in it */
  samples: number;
}

export const SCRAPE_FORMATS: readonly ScrapeFormat[] = ['text', 'json'];

export class ChargingMetrics {
  private readonly registry = new Registry();
  private readonly live = new Set<ConfigurationMetrics>();
  private snapshot: Snapshot = new Map();

  constructor() {
    kept(this.registry, () => this.live);
    collected(this.registry, () => this.snapshot);
  }

  /** A configuration's metrics (label: its name, or its id when unnamed): closed with the configuration. */
  configuration(name: unknown, id: string): ConfigurationMetrics {
    const handle = new ConfigurationMetrics(configurationLabel(name, id), (closed) => this.live.delete(closed));
    this.live.add(handle);
    return handle;
  }

  /** The exposition now. Never rejects for a node's state: a figure that cannot be read is left out. */
  async scrape(format: ScrapeFormat): Promise<Scrape> {
    this.snapshot = this.read();
    try {
      if (format === 'json') {
        const metrics = await this.registry.getMetricsAsJSON();
        const body: Record<string, unknown> = {};
        let samples = 0;
        for (const m of metrics) {
          body[m.name] = { help: m.help, type: m.type, values: m.values };
          samples += m.values.length;
        }
        return { body, contentType: 'application/json; charset=utf-8', samples };
      }
      const text = await this.registry.metrics();
      return { body: text, contentType: this.registry.contentType, samples: countSamples(text) };
    } finally {
      this.snapshot = new Map();
    }
  }

  /** Every live configuration's readers, once per scrape. */
  private read(): Snapshot {
    const snap: Snapshot = new Map();
    for (const handle of this.live) {
      const entry = snap.get(handle.label) ?? {};
      for (const kind of FIGURE_KINDS) {
        const figures = handle.figures(kind);
        const before = entry[kind];
        // A failed reader leaves the kind out for the label, whichever configuration of that name it belongs to.
        entry[kind] = figures === null || before === null ? null : [...(before ?? []), ...figures] as never;
      }
      snap.set(handle.label, entry);
    }
    return snap;
  }
}

/** Lines that are samples (neither a comment nor empty). */
function countSamples(text: string): number {
  let n = 0;
  for (let start = 0; start < text.length; ) {
    const end = text.indexOf('\n', start);
    const stop = end < 0 ? text.length : end;
    if (stop > start && text.charCodeAt(start) !== 35 /* # */) n++;
    start = stop + 1;
  }
  return n;
}

let processMetrics: ChargingMetrics | null = null;

/** The metrics of this process (one Node-RED runtime), created at first use. */
export function runtimeMetrics(): ChargingMetrics {
  processMetrics ??= new ChargingMetrics();
  return processMetrics;
}
