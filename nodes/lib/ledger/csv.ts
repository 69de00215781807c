/**
 * The CSV of a month's records: fixed English headers, RFC 4180 quoting,
 * CRLF, kWh with three decimals. `en`: comma and decimal point; `de`:
 * semicolon, decimal comma and a UTF-8 byte order mark (Excel in German
 * opens it as columns). A cell starting with = + - or @ gets a leading '
 * so that no spreadsheet runs it as a formula.
 */
import type { CsvStyle } from './settings';
import type { LedgerRecord } from './record';

export const CSV_HEADERS = [
  'recordId',
  'revision',
  'token',
  'label',
  'vehicle',
  'locationId',
  'evseId',
  'transactionId',
  'cdrId',
  'startLocal',
  'endLocal',
  'startUtc',
  'endUtc',
  'durationSec',
  'meterStartWh',
  'meterEndWh',
  'energyKWh',
  'cost',
  'currency',
  'tariff',
  'source',
  'endObserved',
] as const;

const BOM = '\uFEFF';

/** One cell: guarded against formulas, then quoted when it holds the separator, a quote or a line break. */
export function csvCell(value: string, separator: string): string {
  let v = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  if (v.includes(separator) || v.includes('"') || v.includes('\n') || v.includes('\r')) v = `"${v.replace(/"/g, '""')}"`;
  return v;
}

function decimal(n: number | null, digits: number, style: CsvStyle): string {
  if (n === null) return '';
  const t = n.toFixed(digits);
  return style === 'de' ? t.replace('.', ',') : t;
}

function cells(r: LedgerRecord, style: CsvStyle, costDecimals: number): string[] {
  return [
    r.recordId,
    String(r.revision),
    r.token ?? '',
    r.label,
    r.vehicle,
    r.locationId ?? '',
    r.evseId ?? '',
    r.transactionId,
    r.cdrId ?? '',
    r.startLocal,
    r.endLocal,
    r.startUtc,
    r.endUtc,
    String(r.durationSec),
    String(r.meterStartWh),
    String(r.meterEndWh),
    decimal(r.energyWh / 1000, 3, style),
    decimal(r.cost, costDecimals, style),
    r.currency ?? '',
    r.tariff ?? '',
    r.source,
    String(r.endObserved),
  ];
}

/** The whole file as text (records in the order given). */
export function toCsv(records: LedgerRecord[], style: CsvStyle, costDecimals: number): string {
  const sep = style === 'de' ? ';' : ',';
  const lines = [CSV_HEADERS.join(sep)];
  for (const r of records) lines.push(cells(r, style, costDecimals).map((c) => csvCell(c, sep)).join(sep));
  return (style === 'de' ? BOM : '') + lines.join('\r\n') + '\r\n';
}
