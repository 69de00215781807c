/**
 * The ledger's configuration, checked once at deploy (an unknown zone or a
 * malformed table is a CONFIG error then, not a surprise at month's end), and
 * the token table: token → label, vehicle, tariff.
 */
import { ChargingError } from '../errors';
import type { MeterUnit, TimestampZone } from '../session/record';
import { costDecimalsOf } from './money';
import { parseTariffs, type Tariff } from './tariff';
import { checkZone, hostZone } from './zone';

export interface TokenRow {
  token: string;
  label: string;
  vehicle: string;
  /** a tariff id, or '' for the default tariff */
  tariff: string;
}

export interface LedgerSettings {
  timeZone: string;
  monthBy: 'start' | 'end';
  tokens: Map<string, TokenRow>;
  tariffs: Map<string, Tariff>;
  defaultTariff: string | null;
  csvStyle: CsvStyle;
  costDecimals: number;
  /** 0: keep every month */
  retentionMonths: number;
  maskTokens: boolean;
  /** from the charging-service configuration, when one is named (else Wh and UTC, the spec's defaults) */
  meterUnit: MeterUnit;
  timestampZone: TimestampZone;
}

export type CsvStyle = 'en' | 'de';

export interface LedgerConfig {
  timeZone?: string;
  monthBy?: string;
  tokens?: unknown;
  tariffs?: unknown;
  defaultTariff?: string;
  csvStyle?: string;
  costDecimals?: string | number;
  retentionMonths?: string | number;
  maskTokens?: boolean;
}

/** A table property as the editor saves it: an array, or its JSON text. */
function table(value: unknown, field: string): unknown {
  if (typeof value !== 'string') return value;
  if (value.trim() === '') return [];
  try {
    return JSON.parse(value);
  } catch {
    throw new ChargingError('CONFIG', `${field} is not valid JSON`, { field });
  }
}

/** The tokens property or a `tokens` command's payload, checked: rows {token, label?, vehicle?, tariff?}. */
export function parseTokens(value: unknown, field = 'tokens'): Map<string, TokenRow> {
  const rows = new Map<string, TokenRow>();
  if (value === undefined || value === null || value === '') return rows;
  if (!Array.isArray(value)) throw new ChargingError('INVALID_INPUT', `${field} must be an array of {token, label, vehicle, tariff}`, { field });
  value.forEach((r, i) => {
    const o = (r && typeof r === 'object' ? r : {}) as Record<string, unknown>;
    const token = typeof o.token === 'string' ? o.token.trim() : '';
    if (!token) throw new ChargingError('INVALID_INPUT', `${field}: row ${i + 1} has no token`, { field });
    const text = (v: unknown) => (typeof v === 'string' ? v.trim().slice(0, 200) : '');
    rows.set(token, { token, label: text(o.label), vehicle: text(o.vehicle), tariff: text(o.tariff) });
  });
  return rows;
}

/** Every row's tariff is in the table (an empty one: the default). */
export function checkTokenTariffs(tokens: Map<string, TokenRow>, tariffs: Map<string, Tariff>): void {
  for (const row of tokens.values()) {
    if (row.tariff && !tariffs.has(row.tariff)) throw new ChargingError('INVALID_INPUT', `tokens: the tariff "${row.tariff.slice(0, 40)}" of a row is not in the tariffs`, { field: 'tokens' });
  }
}

export function tariffMap(value: unknown): Map<string, Tariff> {
  return new Map(parseTariffs(value).map((t) => [t.id, t]));
}

function wholeNumber(value: unknown, fallback: number, max: number): number {
  const n = Number(value);
  return value === '' || value === undefined || !Number.isInteger(n) || n < 0 ? fallback : Math.min(n, max);
}

export function ledgerSettings(config: LedgerConfig, service: { meterUnit?: MeterUnit; timestampZone?: TimestampZone } = {}): LedgerSettings {
  const asConfig = <T>(f: () => T): T => {
    try {
      return f();
    } catch (err) {
      if (err instanceof ChargingError && err.code === 'INVALID_INPUT') throw new ChargingError('CONFIG', err.message, { field: err.field });
      throw err;
    }
  };
  const tariffs = asConfig(() => tariffMap(table(config.tariffs, 'tariffs')));
  const tokens = asConfig(() => parseTokens(table(config.tokens, 'tokens')));
  const defaultTariff = config.defaultTariff?.trim() || null;
  if (defaultTariff && !tariffs.has(defaultTariff)) throw new ChargingError('CONFIG', 'defaultTariff names no tariff of the table', { field: 'defaultTariff' });
  asConfig(() => checkTokenTariffs(tokens, tariffs));
  return {
    timeZone: checkZone(config.timeZone?.trim() || hostZone()),
    monthBy: config.monthBy === 'end' ? 'end' : 'start',
    tokens,
    tariffs,
    defaultTariff,
    csvStyle: config.csvStyle === 'de' ? 'de' : 'en',
    costDecimals: costDecimalsOf(config.costDecimals ?? 2),
    retentionMonths: wholeNumber(config.retentionMonths, 0, 1200),
    maskTokens: config.maskTokens === true,
    meterUnit: service.meterUnit ?? 'Wh',
    timestampZone: service.timestampZone ?? 'UTC',
  };
}

/** The tariff a token is priced with now: its row's, else the default, else none. */
export function tariffFor(settings: LedgerSettings, token: string | null): Tariff | null {
  const row = token ? settings.tokens.get(token) : undefined;
  const id = row?.tariff || settings.defaultTariff;
  return (id && settings.tariffs.get(id)) || null;
}

/** "****1234": the last 4 characters, when tokens are masked. */
export function maskToken(token: string, mask: boolean): string {
  if (!mask || token.startsWith('forgotten:')) return token;
  return `****${token.slice(-4)}`;
}
