/**
 * The ledger's commands (msg.topic): report, export, get, cdr, tariffs,
 * tokens, purge, forget. Each answers on output 2 with what it found or did;
 * bad input throws a ChargingError with a code before anything changes.
 */
import { createHash } from 'node:crypto';
import { ChargingError } from '../errors';
import type { Books } from './books';
import { cdrLookups, corrected, parseCdr } from './cdr';
import { toCsv } from './csv';
import type { CommandTopic } from './input';
import type { LedgerRecord } from './record';
import { shown } from './record';
import { checkTokenTariffs, parseTokens, tariffMap, type CsvStyle } from './settings';
import { inOrder, statement, type Statement } from './statement';
import type { StoredRecord } from './store';
import { addMonths, monthRange, parseMonth } from './zone';

export interface Answer {
  payload: unknown;
  filename?: string;
}

/** The longest range one export may cover. */
const MAX_EXPORT_MONTHS = 36;

function obj(payload: unknown, topic: string): Record<string, unknown> {
  if (payload === undefined || payload === null || payload === '') return {};
  if (typeof payload !== 'object' || Array.isArray(payload)) throw new ChargingError('INVALID_INPUT', `${topic}: msg.payload must be an object`, { field: 'payload' });
  return payload as Record<string, unknown>;
}

function monthField(p: Record<string, unknown>, key: string, fallback?: string): string {
  const v = Object.prototype.hasOwnProperty.call(p, key) ? p[key] : undefined;
  if (v === undefined && fallback) return fallback;
  if (!parseMonth(v)) throw new ChargingError('INVALID_INPUT', `${key} must be a month written YYYY-MM`, { field: key });
  return v as string;
}

function tokenField(p: Record<string, unknown>): string | null {
  const v = p.token;
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string') throw new ChargingError('INVALID_INPUT', 'token must be a text', { field: 'token' });
  return v;
}

/** A fingerprint of a configured table: a table set by message is kept until the configured one changes. */
export function fingerprint(table: unknown): string {
  return createHash('sha256').update(JSON.stringify(table ?? null)).digest('hex').slice(0, 16);
}

export class LedgerCommands {
  constructor(
    private readonly books: Books,
    /** fingerprints of the configured tables */
    private readonly configured: { tokens: string; tariffs: string },
  ) {}

  run(topic: CommandTopic, payload: unknown): Promise<Answer> {
    switch (topic) {
      case 'report':
        return this.report(obj(payload, topic)).then((s) => ({ payload: s }));
      case 'export':
        return this.export(obj(payload, topic));
      case 'get':
        return this.get(typeof payload === 'string' ? { transactionId: payload } : obj(payload, topic));
      case 'cdr':
        return this.cdr(payload);
      case 'tariffs':
      case 'tokens':
        return this.table(topic, payload);
      case 'purge':
        return this.books.purge(monthField(obj(payload, topic), 'before')).then((r) => ({ payload: r }));
      case 'forget':
        return this.forget(obj(payload, topic));
    }
  }

  private get settings() {
    return this.books.deps.settings;
  }

  private get store() {
    return this.books.deps.store;
  }

  async report(p: Record<string, unknown>): Promise<Statement> {
    const month = monthField(p, 'month', this.books.currentMonth());
    const token = tokenField(p);
    const { settings } = this;
    const records = (await this.store.month(month)).map((s) => s.record).filter((r) => token === null || r.token === token);
    const range = monthRange(month, settings.timeZone);
    const open = (await this.store.allOpen()).filter((o) => (token === null || o.token === token) && o.startMs < range.toMs && (settings.monthBy === 'end' || o.startMs >= range.fromMs)).length;
    return statement({
      month,
      timeZone: settings.timeZone,
      records: inOrder(records),
      open,
      over: this.books.deps.now() >= range.toMs,
      meta: await this.store.meta(month),
      costDecimals: settings.costDecimals,
      mask: settings.maskTokens,
    });
  }

  async export(p: Record<string, unknown>): Promise<Answer> {
    const hasRange = p.from !== undefined || p.to !== undefined;
    const from = hasRange ? monthField(p, 'from') : monthField(p, 'month', this.books.currentMonth());
    const to = hasRange ? monthField(p, 'to', from) : from;
    if (to < from || addMonths(from, MAX_EXPORT_MONTHS) <= to) throw new ChargingError('INVALID_INPUT', `from..to must be at most ${MAX_EXPORT_MONTHS} months, from first`, { field: 'to' });
    const format = p.format === undefined ? 'csv' : p.format;
    if (format !== 'csv' && format !== 'json') throw new ChargingError('INVALID_INPUT', 'format must be csv or json', { field: 'format' });
    const style = p.csvStyle === undefined ? this.settings.csvStyle : p.csvStyle;
    if (style !== 'en' && style !== 'de') throw new ChargingError('INVALID_INPUT', 'csvStyle must be en or de', { field: 'csvStyle' });
    const token = tokenField(p);
    const records: LedgerRecord[] = [];
    for (let m = from; m <= to; m = addMonths(m, 1)) {
      for (const s of await this.store.month(m)) if (token === null || s.record.token === token) records.push(shown(s.record, this.settings.maskTokens));
      // The whole month exported: later changes to it make its statement amended. One token's part is not the month.
      if (token === null) await this.store.setMeta(m, { exportedAt: new Date(this.books.deps.now()).toISOString(), changes: [] });
    }
    const name = `charging-sessions-${from === to ? from : `${from}_${to}`}`;
    const sorted = inOrder(records);
    if (format === 'json') return { payload: sorted, filename: `${name}.json` };
    return { payload: toCsv(sorted, style as CsvStyle, this.settings.costDecimals), filename: `${name}.csv` };
  }

  /** The stored record by transactionId or cdrId; an open session as {open: true, …}. */
  private async find(p: Record<string, unknown>): Promise<StoredRecord | { open: true; record: unknown } | null> {
    const tx = typeof p.transactionId === 'string' && p.transactionId ? p.transactionId : null;
    const cdr = typeof p.cdrId === 'string' && p.cdrId ? p.cdrId : null;
    if (!tx && !cdr) throw new ChargingError('MISSING_FIELD', 'get: msg.payload needs transactionId or cdrId', { field: 'transactionId' });
    const id = tx ?? (await this.store.recordOfCdr(cdr!));
    if (id === undefined) return null;
    const month = await this.store.monthOf(id);
    if (month !== undefined) return (await this.store.record(month, id)) ?? null;
    const open = await this.store.open(id);
    return open ? { open: true, record: { recordId: open.transactionId, open: true, token: open.token, startUtc: new Date(open.startMs).toISOString(), energyWh: open.lastWh - open.meterStartWh } } : null;
  }

  private async get(p: Record<string, unknown>): Promise<Answer> {
    const found = await this.find(p);
    if (!found) throw noRecord();
    return { payload: 'open' in found ? found.record : shown(found.record, this.settings.maskTokens) };
  }

  private async cdr(payload: unknown): Promise<Answer> {
    const cdr = parseCdr(payload);
    let stored: StoredRecord | undefined;
    for (const look of cdrLookups(cdr)) {
      const id = look.by === 'cdrId' ? await this.store.recordOfCdr(look.id) : look.id;
      const month = id === undefined ? undefined : await this.store.monthOf(id);
      stored = month === undefined ? undefined : await this.store.record(month, id!);
      if (stored) break;
    }
    if (!stored) throw cdr.transactionId && (await this.store.open(cdr.transactionId)) ? stillOpen() : noRecord();
    const next = corrected(stored.record, stored.meter, cdr, this.settings.costDecimals);
    if (!next) return { payload: { changed: false, record: stored.record } };
    await this.books.publish({ record: next, meter: stored.meter }, stored.record);
    return { payload: { changed: true, record: next } };
  }

  private async table(name: 'tokens' | 'tariffs', payload: unknown): Promise<Answer> {
    if (!Array.isArray(payload)) throw new ChargingError('INVALID_INPUT', `${name}: msg.payload must be the table, an array`, { field: 'payload' });
    const { settings } = this;
    if (name === 'tokens') {
      const tokens = parseTokens(payload);
      checkTokenTariffs(tokens, settings.tariffs);
      settings.tokens = tokens;
    } else {
      const tariffs = tariffMap(payload);
      checkTokenTariffs(settings.tokens, tariffs);
      if (settings.defaultTariff && !tariffs.has(settings.defaultTariff)) throw new ChargingError('INVALID_INPUT', 'tariffs: the default tariff must stay in the table', { field: 'payload' });
      settings.tariffs = tariffs;
    }
    await this.store.setTable(name, { config: this.configured[name], table: payload });
    return { payload: { [name]: payload.length } };
  }

  /** The token becomes a hash in every record and open session; label and vehicle go. */
  private async forget(p: Record<string, unknown>): Promise<Answer> {
    const token = tokenField(p);
    if (token === null) throw new ChargingError('MISSING_FIELD', 'forget: msg.payload needs token', { field: 'token' });
    const hashed = `forgotten:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`;
    let records = 0;
    for (const m of await this.store.months()) {
      for (const s of await this.store.month(m)) {
        if (s.record.token !== token) continue;
        await this.store.putRecord({ ...s, record: { ...s.record, token: hashed, label: '', vehicle: '' } });
        records++;
      }
      const meta = await this.store.meta(m);
      if (meta.changes.some((c) => c.token === token)) await this.store.setMeta(m, { ...meta, changes: meta.changes.map((c) => (c.token === token ? { ...c, token: hashed } : c)) });
    }
    for (const o of await this.store.allOpen()) if (o.token === token) await this.store.setOpen(o.transactionId, { ...o, token: hashed });
    return { payload: { token: hashed, records } };
  }
}

/** A CDR before its session's end reached the ledger: there is no record to correct yet. */
function stillOpen(): ChargingError {
  return new ChargingError('NO_RECORD', 'That session is still open in the books: its record is made when it ends; send the CDR again after that');
}

function noRecord(): ChargingError {
  return new ChargingError('NO_RECORD', 'No record with that id in the books');
}
