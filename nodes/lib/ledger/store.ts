/**
 * Where the books are kept, as the rules see it: one entry per open session,
 * one per record under its month, and two small indexes (record → month,
 * cdrId → record), so that an event touches a few entries whatever the size
 * of the books, and a month's report reads that month only. The node's
 * context store implements it (nodes/common/ledger-store.ts).
 */
import type { MeterValues } from './cdr';
import type { LedgerRecord, OpenRecord } from './record';
import type { MonthMeta } from './statement';

/** A record as kept: the record and the meter's values (a credit CDR brings them back). */
export interface StoredRecord {
  record: LedgerRecord;
  meter: MeterValues;
}

/**
 * A revision written but not sent on output 1 yet: kept in the same write as
 * the record, dropped once it was sent. A node closed, or a process killed,
 * between the two finds it when it starts again and sends it then.
 */
export interface Unsent {
  recordId: string;
  month: string;
  /** the revision it replaced (a `corrected` message carries it) */
  previous: LedgerRecord | null;
}

/** A table set by message, with the fingerprint of the configured table it replaced. */
export interface KeptTable {
  config: string;
  table: unknown[];
}

export interface BookStore {
  open(recordId: string): Promise<OpenRecord | undefined>;
  allOpen(): Promise<OpenRecord[]>;
  /** undefined: the session is no longer open */
  setOpen(recordId: string, open: OpenRecord | undefined): Promise<void>;
  /** the month a record is kept under */
  monthOf(recordId: string): Promise<string | undefined>;
  recordOfCdr(cdrId: string): Promise<string | undefined>;
  record(month: string, recordId: string): Promise<StoredRecord | undefined>;
  /** writes the record, its indexes and its month in the month list; closes its open entry; with `unsent`, in the same write */
  putRecord(stored: StoredRecord, unsent?: Unsent): Promise<void>;
  unsent(recordId: string): Promise<Unsent | undefined>;
  allUnsent(): Promise<Unsent[]>;
  /** the revision was sent: its unsent entry goes */
  sent(recordId: string): Promise<void>;
  month(month: string): Promise<StoredRecord[]>;
  meta(month: string): Promise<MonthMeta>;
  setMeta(month: string, meta: MonthMeta): Promise<void>;
  months(): Promise<string[]>;
  /** the month, its records and their index entries go */
  dropMonth(month: string): Promise<number>;
  table(name: 'tokens' | 'tariffs'): Promise<KeptTable | undefined>;
  setTable(name: 'tokens' | 'tariffs', kept: KeptTable): Promise<void>;
}
