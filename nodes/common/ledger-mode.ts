/**
 * charging-ledger's Node-RED side: the settings from the dialog (checked at
 * deploy), the books in the node's context store, one message at a time,
 * records on output 1 and command answers on output 2, errors to Catch with
 * a code and nothing changed, and the badge.
 */
import type { Node, NodeAPI, NodeMessage, NodeMessageInFlow } from 'node-red';
import { localClaims, type Claims } from '../lib/coordination/claims';
import { Books, type RecordMessage } from '../lib/ledger/books';
import { fingerprint, LedgerCommands } from '../lib/ledger/commands';
import { classify } from '../lib/ledger/input';
import { ledgerSettings, parseTokens, tariffMap, type LedgerConfig, type LedgerSettings } from '../lib/ledger/settings';
import { asChargingError, type NodeLifecycle } from './node-lifecycle';
import { ContextBookStore } from './ledger-store';
import { getService } from './service-node';
import { Status } from './status';

export interface LedgerNodeConfig extends LedgerConfig {
  contextStore?: string;
  /** optional: the configuration whose meter unit, timestamp zone and replica coordination the ledger uses */
  service?: string;
}

type Send = (msg: Array<NodeMessage | null>) => void;
type Done = (err?: Error) => void;

/** The context store module behind a store name ('' = the default): 'memory' when settings.js sets none. */
export function storeModule(RED: NodeAPI, name: string | undefined): string {
  const all = (RED.settings as unknown as { contextStorage?: Record<string, unknown> }).contextStorage;
  if (!all || typeof all !== 'object' || Object.keys(all).length === 0) return 'memory';
  let entry: unknown = all[name || 'default'] ?? (name ? undefined : all[Object.keys(all)[0]]);
  if (typeof entry === 'string') entry = all[entry];
  if (!entry) entry = all.default ?? all[Object.keys(all)[0]];
  if (typeof entry === 'string') entry = all[entry];
  const module = (entry as { module?: unknown } | undefined)?.module;
  return typeof module === 'string' ? module : 'custom';
}

export class LedgerMode {
  private readonly books: Books;
  private readonly commands: LedgerCommands;
  private readonly inMemory: boolean;
  /** records kept under the current month (the badge), counted once at start, then as they come */
  private count: { month: string; n: number } | null = null;

  private constructor(
    private readonly node: Node,
    private readonly life: NodeLifecycle,
    settings: LedgerSettings,
    config: LedgerNodeConfig,
    claims: Claims,
    inMemory: boolean,
  ) {
    this.inMemory = inMemory;
    this.books = new Books({
      store: new ContextBookStore(node, config.contextStore),
      settings,
      claims,
      scope: node.id,
      emit: (out) => this.emit(out),
      unshared: (err) => life.warnOnce('unshared', `The ledger wrote a record without the replicas' claim: ${err.message}`),
      now: Date.now,
    });
    this.commands = new LedgerCommands(this.books, { tokens: fingerprint(config.tokens), tariffs: fingerprint(config.tariffs) });
  }

  /** The ledger, or null after its configuration error was reported (it then refuses every message with it). */
  static start(RED: NodeAPI, node: Node, config: LedgerNodeConfig, life: NodeLifecycle): LedgerMode | Error {
    let settings: LedgerSettings;
    let claims: Claims = localClaims;
    try {
      const service = config.service ? getService(RED, config.service) : null;
      settings = ledgerSettings(config, service?.deriveOptions);
      if (service) claims = service.getCoordination().claims;
    } catch (err) {
      const error = asChargingError(err);
      life.report(error);
      return error;
    }
    const inMemory = storeModule(RED, config.contextStore) === 'memory';
    if (inMemory) node.warn('The ledger is kept in the memory context store: its records are lost on restart. Name a persistent store (localfilesystem) in "Keep the books in".');
    const mode = new LedgerMode(node, life, settings, config, claims, inMemory);
    life.track(mode.books.serial(() => mode.resume(config)));
    // Records written but never sent (closed or killed in between) go out once the flows run: not before the nodes they are wired to exist.
    const unsent = () => life.track(mode.books.serial(() => mode.books.resendAll()).catch((err: unknown) => life.report(err)));
    RED.events.once('flows:started', unsent);
    life.onClose(() => void RED.events.off('flows:started', unsent));
    return mode;
  }

  /** Tables set by message are kept until the configured ones change; the badge's count. */
  private async resume(config: LedgerNodeConfig): Promise<void> {
    const { store, settings } = this.books.deps;
    try {
      const tokens = await store.table('tokens');
      if (tokens && tokens.config === fingerprint(config.tokens)) settings.tokens = parseTokens(tokens.table);
      const tariffs = await store.table('tariffs');
      if (tariffs && tariffs.config === fingerprint(config.tariffs)) settings.tariffs = tariffMap(tariffs.table);
      const month = this.books.currentMonth();
      this.count = { month, n: (await store.month(month)).length };
      this.badge();
    } catch (err) {
      this.life.report(err);
    }
  }

  /** One message: booked, or a command answered on output 2; one at a time. */
  input(msg: NodeMessageInFlow, send: Send, done: Done): void {
    const job = this.books.serial(async () => {
      const m = msg as unknown as Record<string, unknown>;
      const input = classify(m);
      if (input.kind === 'open') await this.books.opened(input.facts);
      else if (input.kind === 'close') await this.books.closed(input.facts);
      else if (input.kind === 'command') {
        const answer = await this.commands.run(input.topic, input.payload);
        const out: Record<string, unknown> = { ...m, topic: input.topic, payload: copy(answer.payload) };
        if (answer.filename) out.filename = answer.filename;
        if (!this.life.isClosed) send([null, out as NodeMessage]);
      }
    });
    this.life.track(
      job.then(
        () => done(),
        (err: unknown) => {
          const error = asChargingError(err);
          this.life.board.set(Status.error(error));
          done(error);
        },
      ),
    );
  }

  private emit(out: RecordMessage): boolean {
    if (this.life.isClosed) return false;
    const msg: Record<string, unknown> = { event: out.event, recordId: out.recordId, payload: copy(out.payload) };
    if (out.previous) msg.previous = copy(out.previous);
    this.life.emit([msg as NodeMessage, null]);
    if (this.count && out.event === 'record') {
      const month = this.books.currentMonth();
      if (this.count.month !== month) this.count = { month, n: 0 };
      if (out.payload.month === month) this.count.n++;
    }
    this.badge();
    return true;
  }

  private badge(): void {
    if (this.inMemory) return this.life.board.set(Status.warn('ledger.memory'));
    this.life.board.set(Status.ok('ledger.badge', { count: this.count?.n ?? 0 }));
  }
}

/** The books' own objects never leave the node: a flow may edit what it gets. */
const copy = <T>(v: T): T => (v !== null && typeof v === 'object' ? structuredClone(v) : v);
