/**
 * The ledger's books in flow context, in the context store the node names
 * (`contextStore`, empty = the default store), under one key per node:
 *
 *     "charging-ledger-<node id>": {
 *       o:   { "<record id>": OpenRecord },            sessions not ended yet
 *       ix:  { "<record id>": "YYYY-MM" },             where each record is kept
 *       cx:  { "<cdrId>": "<record id>" },             records by cdrId
 *       mi:  { "YYYY-MM": true },                      the months there are
 *       ob:  { "<record id>": Unsent },                 written, not sent yet
 *       m:   { "YYYY-MM": { r: { "<record id>": StoredRecord }, meta: MonthMeta } },
 *       tab: { tokens?: KeptTable, tariffs?: KeptTable }
 *     }
 *
 * (ids URI-encoded behind a prefix, so that none means anything to an object
 * or to Node-RED's key syntax). Every change is a few nested sets: O(1) in
 * the memory store and in localfilesystem's cache, whatever the size of the
 * books; a month's report reads that month's entry only. Flow context, not
 * node context: node context is deleted each time a node closes.
 */
import type { Node } from 'node-red';
import { ChargingError } from '../lib/errors';
import type { OpenRecord } from '../lib/ledger/record';
import type { MonthMeta } from '../lib/ledger/statement';
import type { BookStore, KeptTable, StoredRecord, Unsent } from '../lib/ledger/store';
import { flowContextOf, type FlowContext } from './flow-context';

export const ledgerKey = (node: Pick<Node, 'id'>): string => `charging-ledger-${node.id}`;

const id = (prefix: string, s: string): string => `["${prefix}${encodeURIComponent(s)}"]`;
const month = (m: string): string => `["${m.replace(/[^0-9-]/g, '')}"]`;

function values<T>(obj: unknown): T[] {
  return obj && typeof obj === 'object' ? (Object.values(obj) as T[]) : [];
}

export class ContextBookStore implements BookStore {
  private readonly flow: FlowContext;
  private readonly base: string;
  private readonly store: string | undefined;

  constructor(node: Node, store: string | undefined) {
    this.flow = flowContextOf(node);
    this.base = `"${ledgerKey(node)}"`;
    this.store = store || undefined;
  }

  /**
   * A store's failure as CONFIG, naming the store: the books cannot be kept
   * there. The keys (they name records) are cut out of the store's text.
   */
  private failed(what: 'read' | 'write', err: unknown, paths: string[]): ChargingError {
    let text = String((err as Error)?.message ?? err);
    for (const p of paths) text = text.split(this.base + p).join('…');
    const where = this.store ? `"${this.store}"` : '(the default)';
    return new ChargingError('CONFIG', `Could not ${what} the books in the context store ${where} (${text.slice(0, 200)}): nothing is booked until they can be kept; check contextStorage in settings.js`);
  }

  private get<T>(path: string): Promise<T | undefined> {
    return new Promise((resolve, reject) => {
      try {
        this.flow.get(this.base + path, this.store, (err, value) => (err ? reject(this.failed('read', err, [path])) : resolve(value as T | undefined)));
      } catch (err) {
        reject(this.failed('read', err, [path]));
      }
    });
  }

  /** Always keys and values as arrays: Node-RED then looks for no store prefix in the key. */
  private set(paths: string[], vals: unknown[]): Promise<void> {
    return new Promise((resolve, reject) => {
      try {
        this.flow.set(
          paths.map((p) => this.base + p),
          vals,
          this.store,
          (err) => (err ? reject(this.failed('write', err, paths)) : resolve()),
        );
      } catch (err) {
        reject(this.failed('write', err, paths));
      }
    });
  }

  open(recordId: string): Promise<OpenRecord | undefined> {
    return this.get(`.o${id('o:', recordId)}`);
  }

  async allOpen(): Promise<OpenRecord[]> {
    return values<OpenRecord>(await this.get('.o'));
  }

  setOpen(recordId: string, open: OpenRecord | undefined): Promise<void> {
    return this.set([`.o${id('o:', recordId)}`], [open]);
  }

  monthOf(recordId: string): Promise<string | undefined> {
    return this.get(`.ix${id('r:', recordId)}`);
  }

  recordOfCdr(cdrId: string): Promise<string | undefined> {
    return this.get(`.cx${id('c:', cdrId)}`);
  }

  record(m: string, recordId: string): Promise<StoredRecord | undefined> {
    return this.get(`.m${month(m)}.r${id('r:', recordId)}`);
  }

  putRecord(stored: StoredRecord, unsent?: Unsent): Promise<void> {
    const r = stored.record;
    const paths = [`.m${month(r.month)}.r${id('r:', r.recordId)}`, `.ix${id('r:', r.recordId)}`, `.mi${month(r.month)}`, `.o${id('o:', r.recordId)}`];
    const vals: unknown[] = [stored, r.month, true, undefined];
    if (r.cdrId) {
      paths.push(`.cx${id('c:', r.cdrId)}`);
      vals.push(r.recordId);
    }
    if (unsent) {
      paths.push(`.ob${id('r:', r.recordId)}`);
      vals.push(unsent);
    }
    return this.set(paths, vals);
  }

  unsent(recordId: string): Promise<Unsent | undefined> {
    return this.get(`.ob${id('r:', recordId)}`);
  }

  async allUnsent(): Promise<Unsent[]> {
    return values<Unsent>(await this.get('.ob'));
  }

  sent(recordId: string): Promise<void> {
    return this.set([`.ob${id('r:', recordId)}`], [undefined]);
  }

  async month(m: string): Promise<StoredRecord[]> {
    return values<StoredRecord>(await this.get(`.m${month(m)}.r`));
  }

  async meta(m: string): Promise<MonthMeta> {
    const meta = await this.get<MonthMeta>(`.m${month(m)}.meta`);
    return { exportedAt: meta?.exportedAt ?? null, changes: Array.isArray(meta?.changes) ? meta.changes : [] };
  }

  setMeta(m: string, meta: MonthMeta): Promise<void> {
    return this.set([`.m${month(m)}.meta`], [meta]);
  }

  async months(): Promise<string[]> {
    const mi = await this.get<Record<string, unknown>>('.mi');
    return mi && typeof mi === 'object' ? Object.keys(mi).sort() : [];
  }

  async dropMonth(m: string): Promise<number> {
    const records = await this.month(m);
    const paths = [`.m${month(m)}`, `.mi${month(m)}`];
    for (const s of records) {
      paths.push(`.ix${id('r:', s.record.recordId)}`);
      if (s.record.cdrId) paths.push(`.cx${id('c:', s.record.cdrId)}`);
    }
    await this.set(paths, paths.map(() => undefined));
    return records.length;
  }

  table(name: 'tokens' | 'tariffs'): Promise<KeptTable | undefined> {
    return this.get(`.tab.${name}`);
  }

  setTable(name: 'tokens' | 'tariffs', kept: KeptTable): Promise<void> {
    return this.set([`.tab.${name}`], [kept]);
  }
}
