/**
 * What a local grant pool keeps of its entries and limits in its store
 * (GrantStore), and how a kept record is read back: a damaged one is
 * dropped, not trusted.
 */
import type { GrantNote, KeptGrant, KeptLimits } from './grants';

/** What the store keeps of an entry: renewals aside, and the weight to 0.5 kW (a measured power that wobbles writes nothing). */
export function keptOf(e: KeptGrant): KeptGrant {
  return { key: e.key, state: e.state, priority: e.priority, weight: Math.round(e.weight * 2) / 2, askedAt: e.askedAt, since: e.since, waitMs: e.waitMs, lapseMs: e.lapseMs, note: e.note };
}

export function sameKept(a: KeptGrant | undefined, b: KeptGrant | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.state !== b.state || a.priority !== b.priority || a.weight !== b.weight || a.askedAt !== b.askedAt || a.since !== b.since || a.waitMs !== b.waitMs || a.lapseMs !== b.lapseMs) return false;
  const ka = Object.keys(a.note);
  return ka.length === Object.keys(b.note).length && ka.every((k) => a.note[k] === b.note[k]);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const finite = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const limitOf = (v: unknown): number | null => {
  const n = finite(v);
  return n !== null && n > 0 ? n : null;
};

export function readKept(raw: unknown): KeptGrant | null {
  if (!isObject(raw) || typeof raw.key !== 'string' || (raw.state !== 'granted' && raw.state !== 'waiting')) return null;
  const askedAt = finite(raw.askedAt);
  if (askedAt === null) return null;
  const note: GrantNote = {};
  if (isObject(raw.note)) for (const [k, v] of Object.entries(raw.note)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) note[k] = v as GrantNote[string];
  return {
    key: raw.key, state: raw.state, priority: Math.trunc(finite(raw.priority) ?? 0), weight: Math.max(0, finite(raw.weight) ?? 0), askedAt, since: finite(raw.since) ?? askedAt,
    waitMs: Math.max(0, finite(raw.waitMs) ?? 0), lapseMs: Math.max(0, finite(raw.lapseMs) ?? 3_600_000), note,
  };
}

export function readLimits(raw: unknown): KeptLimits | null {
  if (!isObject(raw)) return null;
  const configured = isObject(raw.configured) ? raw.configured : {};
  return { limit: limitOf(raw.limit), budgetKW: limitOf(raw.budgetKW), configured: { limit: limitOf(configured.limit), budgetKW: limitOf(configured.budgetKW) } };
}

