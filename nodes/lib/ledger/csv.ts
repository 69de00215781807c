/**
 * The CSV of a month's records: fixed English headers, RFC 4180 quoting,
 * CRLF, kWh with three decimals. `en`: comma and decimal point; `de`:
 * semicolon, decimal comma and a UTF-8 byte order mark (Excel in German
 * opens it as columns). A text cell whose first visible character is
 * = + - or @ (or their full-width forms), or that starts with a tab or a
 * carriage return, gets a leading ' so that no spreadsheet runs it as a
 * formula; the number columns are written by the ledger and stay numbers
 * (a negative reading is -5000, not the text '-5000).
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

/** The columns the ledger writes as numbers: never guarded, so that a spreadsheet sums them. */
const NUMBER_COLUMNS: ReadonlySet<string> = new Set(['revision', 'durationSec', 'meterStartWh', 'meterEndWh', 'energyKWh', 'cost']);

const BOM = '\uFEFF';

/**
 * What a spreadsheet may read as a formula: = + - @ (or full-width) after
 * any blanks and line breaks (an import that trims them still sees the
 * sign), or a leading tab or carriage return. One anchored pass: linear.
 */
const FORMULA = /^(?:[\t\r]|\s*[=+\-@\uff1d\uff0b\uff0d\uff20])/;

/** One cell: a text guarded against formulas, then quoted when it holds the separator, a quote or a line break. */
export function csvCell(value: string, separator: string, number = false): string {
  let v = !number && FORMULA.test(value) ? `'${value}` : value;
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
  for (const r of records) lines.push(cells(r, style, costDecimals).map((c, i) => csvCell(c, sep, NUMBER_COLUMNS.has(CSV_HEADERS[i]))).join(sep));
  return (style === 'de' ? BOM : '') + lines.join('\r\n') + '\r\n';
}
