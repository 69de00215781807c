/**
 * The monthly statement: per token its sessions, energy and cost, and the
 * total as the sum of the rounded sessions (the CSV adds up to it). A month
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
  cost: number | null;
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
  total: number | null;
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

export function statement(input: StatementInput): Statement {
  const byToken = new Map<string, { line: TokenLine; costs: number[] }>();
  for (const r of input.records) {
    const key = r.token ?? '';
    let t = byToken.get(key);
    if (!t) {
      t = { line: { token: r.token === null ? null : maskToken(r.token, input.mask), label: r.label, vehicle: r.vehicle, sessions: 0, energyWh: 0, cost: null }, costs: [] };
      byToken.set(key, t);
    }
    t.line.sessions++;
    t.line.energyWh += r.energyWh;
    if (r.cost !== null) t.costs.push(r.cost);
  }
  const tokens = [...byToken.values()].map(({ line, costs }) => ({ ...line, cost: costs.length ? sumMoney(costs, input.costDecimals) : null }));
  tokens.sort((a, b) => String(a.label || a.token).localeCompare(String(b.label || b.token)));
  const costs = input.records.map((r) => r.cost).filter((c): c is number => c !== null);
  return {
    month: input.month,
    timeZone: input.timeZone,
    currency: currencyOf(input.records),
    complete: input.over && input.open === 0,
    open: input.open,
    amended: input.meta.changes.length > 0,
    changes: input.meta.changes.map((c) => ({ ...c, token: c.token === null ? null : maskToken(c.token, input.mask) })),
    tokens,
    sessions: input.records.length,
    energyWh: input.records.reduce((a, r) => a + r.energyWh, 0),
    total: costs.length ? sumMoney(costs, input.costDecimals) : null,
  };
}

/** Records in the order a statement and a CSV list them: by start, then id. */
export function inOrder(records: LedgerRecord[]): LedgerRecord[] {
  return [...records].sort((a, b) => (a.startUtc < b.startUtc ? -1 : a.startUtc > b.startUtc ? 1 : a.recordId < b.recordId ? -1 : 1));
}
