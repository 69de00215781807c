/**
 * The books: sessions in, records out, exactly once per record revision.
 *
 * One message at a time per node (a queue), so that a repeated `ended` reads
 * what the first one wrote. A record is written with a note that it is not
 * sent yet, emitted, then the note goes: a revision already sent is never
 * emitted again (a repeat, the stop node's output after the watch node's, a
 * replay after a restart), and one written but never sent (the node closed,
 * the process killed, in between) is sent when the ledger starts again or its
 * `ended` comes again, with the same recordId and revision. With replicas the
 * write-and-emit of each revision is a claim of the Coordination seam, keyed
 * by the node, the record and its revision: one replica runs it, the others
 * take its outcome; a claimer gone without an outcome is taken over (a record
 * emitted twice is upserted by recordId and revision; never is not).
 */
import type { ChargingError } from '../errors';
import type { Claims } from '../coordination/claims';
import { meterValues } from './cdr';
import { advance, closeRecord, openRecord, type LedgerRecord, type OpenRecord, type SessionFacts } from './record';
import type { LedgerSettings } from './settings';
import type { BookStore, StoredRecord } from './store';
import { addMonths, monthOf } from './zone';

/** What output 1 carries: a new record or a new revision of one. */
export interface RecordMessage {
  event: 'record' | 'corrected';
  recordId: string;
  payload: LedgerRecord;
  previous?: LedgerRecord;
}

export interface BooksDeps {
  store: BookStore;
  settings: LedgerSettings;
  claims: Claims;
  /** the node's id: two ledgers keep separate books */
  scope: string;
  /** false: not sent (the node is closing); the revision stays unsent */
  emit(out: RecordMessage): boolean;
  /** a claim could not be shared (Redis away): the revision was written here alone */
  unshared(err: ChargingError): void;
  /** the host's wall clock: only for "is the month over" and retention, never a record's time */
  now(): number;
}

/** The longest a record's write may take: the other replicas wait as long for its outcome. */
const CLAIM_MS = 10_000;

export class Books {
  private queue: Promise<unknown> = Promise.resolve();
  /** the month whose retention was last applied */
  private retained: string | null = null;

  constructor(readonly deps: BooksDeps) {}

  /** Runs `work` after every earlier message's work (a failed one included). */
  serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** A `started` or `updated`: the open record is opened or advanced; nothing is emitted. */
  async opened(facts: SessionFacts): Promise<void> {
    const { store, settings } = this.deps;
    const open = await store.open(facts.transactionId);
    if (open) return store.setOpen(facts.transactionId, advance(open, facts, settings));
    // A late event for a session already booked (a replay): the record is closed, nothing to keep.
    if ((await store.monthOf(facts.transactionId)) !== undefined) return;
    await store.setOpen(facts.transactionId, openRecord(facts, settings));
  }

  /** An `ended` (watch mode or the stop node): the record, once. */
  async closed(facts: SessionFacts): Promise<void> {
    const { store, settings } = this.deps;
    if ((await store.monthOf(facts.transactionId)) !== undefined) return this.resend(facts.transactionId);
    const open: OpenRecord = (await store.open(facts.transactionId)) ?? openRecord(facts, settings);
    const record = closeRecord(open, facts, settings);
    await this.publish({ record, meter: meterValues(record) }, undefined);
    await this.retain();
  }

  /**
   * Writes a revision and emits it, through the claim of that revision: run
   * here, or by the replica that claimed it first. A revision found in the
   * store when the claim runs is emitted only when it was never sent (the
   * claimer before was gone between its write and its output).
   */
  async publish(stored: StoredRecord, previous: LedgerRecord | undefined): Promise<boolean> {
    const { record } = stored;
    const key = ['ledger', this.deps.scope, record.recordId, String(record.revision)];
    // What the claim publishes for the other replicas is only whether it was sent: the record stays in this process.
    const run = await this.deps.claims.run(key, () => this.writeAndSend(stored, previous), { workMs: CLAIM_MS, takeOver: 'when-claimer-gone' }, (err) => this.deps.unshared(err));
    return run.role === 'ran' && run.result;
  }

  /** A revision written but never sent is sent now (with its recordId and revision); one sent is not. */
  async resend(recordId: string): Promise<void> {
    const { store } = this.deps;
    const unsent = await store.unsent(recordId);
    if (!unsent) return;
    const kept = await store.record(unsent.month, recordId);
    if (!kept) return store.sent(recordId);
    await this.publish(kept, unsent.previous ?? undefined);
  }

  /** Every revision written but never sent: at start. */
  async resendAll(): Promise<void> {
    for (const u of await this.deps.store.allUnsent()) await this.resend(u.recordId);
  }

  /** The claimed work: the revision written (unless it is there already) and sent. */
  private async writeAndSend(stored: StoredRecord, previous: LedgerRecord | undefined): Promise<boolean> {
    const { store } = this.deps;
    const { record } = stored;
    const month = await store.monthOf(record.recordId);
    const kept = month === undefined ? undefined : await store.record(month, record.recordId);
    if (kept && kept.record.revision >= record.revision) {
      const unsent = kept.record.revision === record.revision ? await store.unsent(record.recordId) : undefined;
      return unsent ? this.send(kept.record, unsent.previous ?? undefined) : false;
    }
    await store.putRecord(stored, { recordId: record.recordId, month: record.month, previous: previous ?? null });
    await this.noteChange(record, previous);
    return this.send(record, previous);
  }

  private async send(record: LedgerRecord, previous: LedgerRecord | undefined): Promise<boolean> {
    const out: RecordMessage = previous ? { event: 'corrected', recordId: record.recordId, payload: record, previous } : { event: 'record', recordId: record.recordId, payload: record };
    if (!this.deps.emit(out)) return false;
    await this.deps.store.sent(record.recordId);
    return true;
  }

  /** A change to a month already exported: kept for its statement (`amended`). */
  private async noteChange(record: LedgerRecord, previous: LedgerRecord | undefined): Promise<void> {
    const { store } = this.deps;
    const meta = await store.meta(record.month);
    if (!meta.exportedAt) return;
    const change = {
      recordId: record.recordId,
      revision: record.revision,
      token: record.token,
      energyWh: record.energyWh,
      cost: record.cost,
      previousEnergyWh: previous?.energyWh ?? null,
      previousCost: previous?.cost ?? null,
    };
    await store.setMeta(record.month, { exportedAt: meta.exportedAt, changes: [...meta.changes, change] });
  }

  /** The current month in the zone, by the host's clock (what "now" means to a person). */
  currentMonth(): string {
    return monthOf(this.deps.now(), this.deps.settings.timeZone);
  }

  /** Drops closed months before `before`; never the current or the previous month. */
  async purge(before: string): Promise<{ months: string[]; records: number }> {
    const { store } = this.deps;
    const limit = addMonths(this.currentMonth(), -1);
    const cut = before < limit ? before : limit;
    const months = (await store.months()).filter((m) => m < cut).sort();
    let records = 0;
    for (const m of months) records += await store.dropMonth(m);
    return { months, records };
  }

  /** Retention, once per month: months older than retentionMonths go. */
  private async retain(): Promise<void> {
    const keep = this.deps.settings.retentionMonths;
    if (keep <= 0) return;
    const current = this.currentMonth();
    if (this.retained === current) return;
    this.retained = current;
    await this.purge(addMonths(current, -keep));
  }
}
