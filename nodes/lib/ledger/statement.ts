/**
 * The monthly statement: per token its sessions, energy and cost, and the
 * total as the sum of the rounded sessions (the CSV adds up to it), per
 * currency: amounts in two currencies are never added up. A month
 * is complete once it is over and no session of it is still open; amended
 * once a record changed after the month was exported.
 */
import { sumMoney } from './money';
import type { LedgerRecord } from './record';
import { maskToken } from './settings';

/** A change to an exported month: the record's revision and what it had before. */
export interface MonthChange {
  recordId: string;
  revision: number;
  token: string | null;
  energyWh: number;
  cost: number | null;
  previousEnergyWh: number | null;
  previousCost: number | null;
}

export interface MonthMeta {
  /** ISO time of the last export of the whole month (the host's clock: when a person exported it) */
  exportedAt: string | null;
  /** changes since that export */
  changes: MonthChange[];
}

export interface TokenLine {
  token: string | null;
  label: string;
  vehicle: string;
  sessions: number;
  energyWh: number;
  /** one code, "mixed", or null when none of its sessions is priced */
  currency: string | null;
  /** the sum of its rounded sessions; null when none is priced or they are in several currencies (see totals) */
  cost: number | null;
  /** the sum per currency */
  totals: Record<string, number>;
}

export interface Statement {
  month: string;
  timeZone: string;
  currency: string | null;
  complete: boolean;
  open: number;
  amended: boolean;
  changes: MonthChange[];
  tokens: TokenLine[];
  sessions: number;
  energyWh: number;
  /** the sum of the rounded sessions; null when none is priced or they are in several currencies (see totals) */
  total: number | null;
  /** the sum of the rounded sessions per currency */
  totals: Record<string, number>;
}

export interface StatementInput {
  month: string;
  timeZone: string;
  records: LedgerRecord[];
  open: number;
  /** the month is over (by the host's clock: a statement is asked now) */
  over: boolean;
  meta: MonthMeta;
  costDecimals: number;
  mask: boolean;
}

/** The currency of the priced records: one code, "mixed", or null when none is priced. */
function currencyOf(records: LedgerRecord[]): string | null {
  const codes = new Set(records.map((r) => r.currency).filter((c): c is string => c !== null));
  return codes.size === 0 ? null : codes.size === 1 ? [...codes][0] : 'mixed';
}

/** The sums of the rounded costs per currency, in code order, and the one total when there is one currency. */
function sums(records: LedgerRecord[], decimals: number): { currency: string | null; total: number | null; totals: Record<string, number> } {
  const per = new Map<string, number[]>();
  for (const r of records) if (r.cost !== null && r.currency !== null) per.set(r.currency, [...(per.get(r.currency) ?? []), r.cost]);
  const totals: Record<string, number> = {};
  for (const code of [...per.keys()].sort()) totals[code] = sumMoney(per.get(code)!, decimals);
  const currency = currencyOf(records);
  return { currency, total: currency !== null && currency !== 'mixed' ? totals[currency] : null, totals };
}

export function statement(input: StatementInput): Statement {
  const byToken = new Map<string, { line: Omit<TokenLine, 'currency' | 'cost' | 'totals'>; records: LedgerRecord[] }>();
  for (const r of input.records) {
    const key = r.token ?? '';
    let t = byToken.get(key);
    if (!t) {
      t = { line: { token: r.token === null ? null : maskToken(r.token, input.mask), label: r.label, vehicle: r.vehicle, sessions: 0, energyWh: 0 }, records: [] };
      byToken.set(key, t);
    }
    t.line.sessions++;
    t.line.energyWh += r.energyWh;
    t.records.push(r);
  }
  const tokens = [...byToken.values()].map(({ line, records }) => {
    const { currency, total, totals } = sums(records, input.costDecimals);
    return { ...line, currency, cost: total, totals };
  });
  tokens.sort((a, b) => String(a.label || a.token).localeCompare(String(b.label || b.token)));
  const all = sums(input.records, input.costDecimals);
  return {
    month: input.month,
    timeZone: input.timeZone,
    currency: all.currency,
    complete: input.over && input.open === 0,
    open: input.open,
    amended: input.meta.changes.length > 0,
    changes: input.meta.changes.map((c) => ({ ...c, token: c.token === null ? null : maskToken(c.token, input.mask) })),
    tokens,
    sessions: input.records.length,
    energyWh: input.records.reduce((a, r) => a + r.energyWh, 0),
    total: all.total,
    totals: all.totals,
  };
}

/** Records in the order a statement and a CSV list them: by start, then id. */
export function inOrder(records: LedgerRecord[]): LedgerRecord[] {
  return [...records].sort((a, b) => (a.startUtc < b.startUtc ? -1 : a.startUtc > b.startUtc ? 1 : a.recordId < b.recordId ? -1 : 1));
}
