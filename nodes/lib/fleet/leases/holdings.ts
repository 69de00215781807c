/**
 * What a replica holds of one lease scope, and until when it may act on each
 * item: from the moment its lease's renewal was *sent* plus the lease time,
 * less a margin, on its own monotonic clock. Redis sets the expiry later than
 * that, so a replica stops before any other can take the lease, even when it
 * lost Redis. An item newly held is not acted on until it is announced (its
 * state loaded and the caller told).
 */
import type { CommitHold } from './state-commit';

export interface Held extends CommitHold {
  /** monotonic ms until which this replica may act on the item */
  validUntil: number;
  /** false from the lease's acquisition until the state is loaded and the caller told (recovery may hold it back) */
  announced: boolean;
  /** commits of one item run one after the other (each expects the revision the last one wrote) */
  chain: Promise<unknown>;
  /** commits queued or on their way: a reload leaves the item alone meanwhile (the answer may be its own commit) */
  pending: number;
}

export class Holdings {
  private readonly held = new Map<string, Held>();

  constructor(private readonly now: () => number) {}

  get(item: string): Held | undefined {
    return this.held.get(item);
  }

  /** Held, announced and within its validity. */
  valid(item: string): boolean {
    const h = this.held.get(item);
    return h !== undefined && h.announced && this.now() < h.validUntil;
  }

  items(): string[] {
    return [...this.held.keys()];
  }

  /** Items held and announced (optionally: with no commit on its way). */
  announced(idle = false): string[] {
    return [...this.held].filter(([, h]) => h.announced && (!idle || h.pending === 0)).map(([t]) => t);
  }

  unannounced(): string[] {
    return [...this.held].filter(([, h]) => !h.announced).map(([t]) => t);
  }

  /**
   * A wanted lease's answer (LEASES: 0 another's, 1 renewed, 2 taken) sent at
   * validUntil less the lease's validity: 'lost' when another holds it (the
   * caller drops it), else kept or newly held; an answer that came too late
   * to act on changes nothing.
   */
  renewed(item: string, result: number, validUntil: number): 'lost' | 'held' {
    const h = this.held.get(item);
    if (result === 0) return h ? 'lost' : 'held';
    if (this.now() >= validUntil) return 'held';
    if (h) h.validUntil = validUntil;
    else this.held.set(item, { validUntil, rev: 0, announced: false, chain: Promise.resolve(), unresolved: null, pending: 0 });
    return 'held';
  }

  /** Items past their validity, no longer held, with how long ago (ms) each lapsed. */
  lapsed(): Array<{ item: string; agoMs: number }> {
    const now = this.now();
    const out: Array<{ item: string; agoMs: number }> = [];
    for (const [item, h] of this.held) {
      if (now < h.validUntil) continue;
      this.held.delete(item);
      out.push({ item, agoMs: now - h.validUntil });
    }
    return out;
  }

  /** No longer held; returns whether it was. */
  release(item: string): boolean {
    return this.held.delete(item);
  }

  clear(): void {
    this.held.clear();
  }
}
