/**
 * Redis Sentinel for the coordination (docs/fleet.md, "Sentinel"): which data
 * node is the primary, asked of every sentinel the URL lists, and whether a
 * write a primary acknowledged stands.
 *
 * - The primary is the one a majority of the listed sentinels names; with no
 *   majority (one sentinel names another server, too few answer, none knows
 *   the name) nothing connects, and the error says which it is. A single
 *   sentinel cut off from its peers may still name a primary they demoted.
 * - A failover: each sentinel's `+switch-master` is watched (a subscription
 *   per sentinel), and the connection moves to the new primary at once.
 * - Asynchronous replication: a primary being replaced keeps acknowledging
 *   writes until the sentinels demote it (about 10 s after SENTINEL FAILOVER
 *   on Redis 7), and those writes are lost. A write the fleet must not lose
 *   (durable: a claim, a commit) is therefore followed by WAIT for the healthy
 *   replicas the sentinels know; when fewer acknowledge it (none left, or one
 *   being promoted), the sentinels are asked whether this server is still the
 *   primary with no failover under way: if not, the write is not taken as
 *   done (connection.ts retries it on the new primary).
 *
 * Every wait is bounded; every message names hosts and the primary's name,
 * never a password.
 */
import net from 'node:net';
import tls, { type ConnectionOptions as TlsOptions } from 'node:tls';
import { AbstractConnector, Redis } from 'ioredis';
import { ChargingError } from '../../errors';
import { Backoff, sleep } from './retry';
import { isIp, type Endpoint, type SentinelTarget } from './url';

/** What one sentinel said of the primary's name. */
export interface SentinelAnswer {
  sentinel: Endpoint;
  /** the primary it names (during a failover: the one being promoted) */
  primary?: Endpoint;
  /** it is failing the primary over now */
  failingOver?: boolean;
  /** replicas of that primary it sees as healthy */
  replicas?: number;
  /** it knows no primary of that name */
  unknown?: boolean;
  /** why it gave no answer (redacted) */
  error?: string;
  /** it refused the sentinel credentials */
  refused?: boolean;
  /** its run id (INFO server): the same sentinel under two names in the URL is one vote */
  id?: string;
}

/** The primary the sentinels agree on. */
export interface PrimaryFound {
  primary: Endpoint;
  /** sentinels that answered (of those listed) */
  answered: number;
  listed: number;
  /** healthy replicas of it, as the sentinels see them: the writes a durable write waits for */
  replicas: number;
}

export interface SentinelsOptions {
  tls?: TlsOptions;
  /** bound of one question to one sentinel (connect and answer) */
  timeoutMs: number;
  redact(text: string): string;
  /** "Coordinate replicas (Redis at redis-sentinel://…/name)" */
  prefix: string;
  /** monotonic ms */
  now: () => number;
}

/** How long a failover a sentinel says is under way keeps a durable write from counting (see stillPrimary). */
export const FAILOVER_GRACE_MS = 5_000;
/** A sentinel that gave no answer in time is not waited for again for this long (then asked once more). */
export const SILENT_MS = 5_000;

const addr = (e: Endpoint) => `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`;
export const same = (a: Endpoint | undefined | null, b: Endpoint) => !!a && a.port === b.port && a.host === b.host;

/** The sentinels of one URL: one command connection each (kept), and one subscription each for +switch-master once watched. */
export class Sentinels {
  private readonly clients = new Map<string, Redis>();
  /** monotonic ms until which a sentinel that gave no answer in time counts as not answering, without being waited for */
  private readonly silentUntil = new Map<string, number>();
  private readonly watchers: Redis[] = [];
  private closed = false;
  /** monotonic ms since a sentinel says a failover is under way (null: none does) */
  private failingSince: number | null = null;
  /** +switch-master messages heard so far: a connection made on an answer older than the last one is to a primary being replaced */
  private switchCount = 0;
  /** the primary the last +switch-master named */
  private switchTo: Endpoint | null = null;

  constructor(
    readonly target: SentinelTarget,
    private readonly options: SentinelsOptions,
  ) {}

  get switches(): number {
    return this.switchCount;
  }

  get switchedTo(): Endpoint | null {
    return this.switchTo;
  }

  /** Asks every listed sentinel at once, each bounded by timeoutMs. */
  async askAll(): Promise<SentinelAnswer[]> {
    const answers = await Promise.all(this.target.sentinels.map((s) => this.ask(s)));
    // 127.0.0.1 and localhost, a name and its address: one sentinel cut off from its peers would otherwise be a majority alone.
    const seen = new Map<string, Endpoint>();
    return answers.map((a) => {
      const first = a.id && !a.error ? seen.get(a.id) : undefined;
      if (a.id && !a.error && !first) seen.set(a.id, a.sentinel);
      return first ? { sentinel: a.sentinel, error: `the same sentinel as ${addr(first)}` } : a;
    });
  }

  /** The primary a majority of the listed sentinels names; else a ChargingError saying why none. */
  async primary(): Promise<PrimaryFound> {
    return this.decide(await this.askAll());
  }

  /**
   * Whether `primary` is the primary now with no failover under way: a
   * majority names it, and no answering sentinel names another or is
   * failing it over. Also gives the healthy replicas to wait for next.
   */
  async stillPrimary(primary: Endpoint): Promise<{ ok: boolean; replicas: number; why: string }> {
    const answers = await this.askAll();
    const named = answers.filter((a) => same(a.primary, primary));
    const replicas = Math.max(0, ...named.map((a) => a.replicas ?? 0));
    const elsewhere = answers.find((a) => a.primary && !same(a.primary, primary));
    if (elsewhere) return { ok: false, replicas, why: `sentinel ${addr(elsewhere.sentinel)} names ${addr(elsewhere.primary as Endpoint)} as the primary now` };
    const failing = answers.find((a) => a.failingOver);
    const now = this.options.now();
    if (!failing) this.failingSince = null;
    else if (this.failingSince === null) this.failingSince = now;
    // A failover promotes its replica within a second or two of its start; one still "in progress" long after has not
    // (no replica fit to promote, a lost election) and leaves this primary in place.
    if (failing && now - (this.failingSince as number) < FAILOVER_GRACE_MS) return { ok: false, replicas, why: `sentinel ${addr(failing.sentinel)} is failing ${this.target.name} over` };
    if (named.length < this.majority) return { ok: false, replicas, why: `only ${named.length} of ${answers.length} sentinels name ${addr(primary)} as the primary` };
    return { ok: true, replicas, why: '' };
  }

  /** Calls `onSwitch` with the new primary at every +switch-master of this primary's name, from any sentinel, until close(). */
  watch(onSwitch: (to: Endpoint) => void): void {
    if (this.closed || this.watchers.length > 0) return;
    for (const s of this.target.sentinels) {
      const sub = this.client(s, { subscriber: true });
      sub.on('message', (channel: string, text: string) => {
        // "<name> <old ip> <old port> <new ip> <new port>"
        const [name, , , host, port] = String(text).split(' ');
        if (this.closed || channel !== '+switch-master' || name !== this.target.name) return;
        this.switchCount++;
        this.switchTo = { host: String(host).toLowerCase(), port: Number(port) };
        onSwitch(this.switchTo);
      });
      // Subscribed again after each reconnection (ioredis's autoResubscribe).
      sub.subscribe('+switch-master').catch(() => undefined);
      this.watchers.push(sub);
    }
  }

  close(): void {
    this.closed = true;
    for (const c of [...this.clients.values(), ...this.watchers.splice(0)]) c.disconnect();
    this.clients.clear();
  }

  private get majority(): number {
    return Math.floor(this.target.sentinels.length / 2) + 1;
  }

  private decide(answers: SentinelAnswer[]): PrimaryFound {
    const t = this.target;
    const listed = t.sentinels.length;
    const answered = answers.filter((a) => !a.error);
    const at = `${this.options.prefix}: `;
    const votes = new Map<string, { primary: Endpoint; n: number; replicas: number }>();
    for (const a of answered) {
      if (!a.primary) continue;
      const v = votes.get(addr(a.primary)) ?? { primary: a.primary, n: 0, replicas: 0 };
      v.n++;
      v.replicas = Math.max(v.replicas, a.replicas ?? 0);
      votes.set(addr(a.primary), v);
    }
    const best = [...votes.values()].sort((a, b) => b.n - a.n)[0];
    if (best && best.n >= this.majority) return { primary: best.primary, answered: answered.length, listed, replicas: best.replicas };
    // Only without a majority: one sentinel of three with another password (or a liar saying NOAUTH) does not outvote two that agree.
    const refused = answers.find((a) => a.refused);
    if (refused) throw new ChargingError('CONFIG', `${at}sentinel ${addr(refused.sentinel)} refused the sentinel password: put it in the URL's query (?sentinelPassword=…), apart from the data nodes' password before the hosts`, { cause: 'SENTINEL_AUTH' });
    if (answered.length > 0 && answered.every((a) => a.unknown)) {
      throw new ChargingError('CONFIG', `${at}no sentinel knows a primary named ${t.name} (${answered.length} of ${listed} answered): check the name after the hosts (sentinel monitor <name> in sentinel.conf)`, { cause: 'UNKNOWN_PRIMARY' });
    }
    const said = answers.map((a) => `${addr(a.sentinel)}: ${a.primary ? addr(a.primary) : a.unknown ? `no primary named ${t.name}` : (a.error ?? 'no answer')}`).join('; ');
    if (votes.size > 1 || answered.some((a) => a.unknown)) {
      throw new ChargingError('NETWORK', `${at}the sentinels disagree on the primary ${t.name}, no majority of the ${listed} listed names one (${said}); every sentinel in the URL must monitor the same primary`, { cause: 'SENTINELS_DISAGREE', retryable: true });
    }
    throw new ChargingError('NETWORK', `${at}only ${answered.length} of ${listed} sentinels answered, a majority (${this.majority}) must (${said})`, { cause: 'SENTINELS_UNREACHABLE', retryable: true });
  }

  /** One sentinel's view of the primary: its address, its flags, its healthy replicas; one round trip. */
  private async ask(s: Endpoint): Promise<SentinelAnswer> {
    const name = this.target.name;
    // A durable write confirmed while close() lands asks after it: no connection may be opened then (it would outlive close()).
    if (this.closed) return { sentinel: s, error: 'closed' };
    // Waiting out its timeout at every question would add it to every durable write and reconnection; it counts as
    // not answering either way, so the majority rule is the same.
    if ((this.silentUntil.get(addr(s)) ?? 0) > this.options.now()) return { sentinel: s, error: 'no answer in time' };
    const client = this.client(s);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.options.timeoutMs} ms`)), this.options.timeoutMs);
    });
    try {
      const results = await Promise.race([client.pipeline().call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).call('SENTINEL', 'MASTER', name).call('SENTINEL', 'REPLICAS', name).info('server').exec(), bound]);
      const [byName, master, replicas] = (results ?? []).slice(0, 3).map(([err, value]) => {
        if (err) throw err;
        return value;
      });
      // Without it (INFO denied by an ACL), the answer still counts: only the same-sentinel check is lost.
      const id = /run_id:([0-9a-f]{40})/.exec(String(results?.[3]?.[1] ?? ''))?.[1];
      if (!Array.isArray(byName)) return { sentinel: s, unknown: true, id };
      const host = String(byName[0]).toLowerCase();
      const port = Number(byName[1]);
      // A broken or hostile sentinel's "address" is no vote, and is not repeated (a megabyte of host name would be, in every message).
      if (host.length > 253 || !/^[a-z0-9._:-]+$/.test(host) || !Number.isInteger(port) || port < 1 || port > 65535) return { sentinel: s, error: 'an unreadable answer' };
      const flags = fields(master).flags ?? '';
      const healthy = Array.isArray(replicas) ? replicas.filter((r) => !/s_down|o_down|disconnected/.test(fields(r).flags ?? '') && fields(r)['master-link-status'] !== 'err').length : 0;
      return { sentinel: s, primary: { host, port }, failingOver: /failover_in_progress/.test(flags), replicas: healthy, id };
    } catch (err) {
      const text = this.options.redact(String((err as Error)?.message ?? err)).slice(0, 200);
      // A silent sentinel (frozen, or cut off without a reset) would keep every unanswered question queued on this
      // connection for as long as it stays silent: dropped, and the next question opens a new one.
      if (/no answer within|Command timed out/.test(text) && this.clients.get(addr(s)) === client) {
        this.clients.delete(addr(s));
        this.silentUntil.set(addr(s), this.options.now() + SILENT_MS);
        client.disconnect();
      }
      if (/No such master/i.test(text)) return { sentinel: s, unknown: true };
      if (/WRONGPASS|NOAUTH|invalid password|invalid username-password/i.test(text)) return { sentinel: s, refused: true, error: 'refused the credentials' };
      return { sentinel: s, error: /ECONNREFUSED|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|no answer within|Command timed out|Connection is closed|Stream isn't writeable/.test(text) ? (/(ECONNREFUSED|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH)/.exec(text)?.[1] ?? 'no answer in time') : text };
    } finally {
      clearTimeout(timer);
    }
  }

  private client(s: Endpoint, opts: { subscriber?: boolean } = {}): Redis {
    const key = addr(s);
    const kept = opts.subscriber ? undefined : this.clients.get(key);
    if (kept) return kept;
    const t = this.target;
    const client = new Redis({
      host: s.host,
      port: s.port,
      username: t.sentinelUsername,
      password: t.sentinelPassword,
      tls: t.tls ? { servername: isIp(s.host) ? undefined : s.host, ...(this.options.tls ?? {}) } : undefined,
      connectTimeout: this.options.timeoutMs,
      commandTimeout: opts.subscriber ? undefined : this.options.timeoutMs,
      maxRetriesPerRequest: 1,
      enableReadyCheck: false,
      retryStrategy: (times: number) => (this.closed ? null : Math.min(2_000, 100 * 2 ** Math.min(times, 5))),
      connectionName: 'chargectl-sentinel-watch',
      showFriendlyErrorStack: false,
    });
    client.on('error', () => undefined);
    if (!opts.subscriber) this.clients.set(key, client);
    return client;
  }
}

function fields(reply: unknown): Record<string, string> {
  const o: Record<string, string> = {};
  if (!Array.isArray(reply)) return o;
  for (let i = 0; i + 1 < reply.length; i += 2) o[String(reply[i])] = String(reply[i + 1]);
  return o;
}

/** What the connector tells of each primary it connects to, and how many +switch-master had been heard before the sentinels were asked. */
export type PrimaryListener = (found: PrimaryFound, switchesBefore: number) => void;

/**
 * An ioredis connector (its `Connector` option) that connects to the primary
 * the sentinels agree on, asked again at every (re)connection. Until they
 * agree it connects to nothing: each failure is told as an `error` (health
 * down, with the reason) and asked again after a pause, until disconnect().
 * A server that answers as a replica (a demoted primary) is refused at the
 * ready check, and the next connection asks the sentinels again.
 */
export function primaryConnector(sentinels: Sentinels, tlsOptions: TlsOptions | undefined, onPrimary: PrimaryListener) {
  return class PrimaryConnector extends AbstractConnector {
    constructor(options: unknown) {
      super((options as { disconnectTimeout?: number }).disconnectTimeout ?? 2_000);
    }

    override check(info: { role?: string }): boolean {
      return info.role === undefined || info.role === 'master';
    }

    async connect(emit: (type: string, err: Error) => void): Promise<net.Socket> {
      this.connecting = true;
      const backoff = new Backoff({ firstMs: 100, maxMs: 2_000 });
      let found: PrimaryFound | null = null;
      let switchesBefore = sentinels.switches;
      while (!found) {
        switchesBefore = sentinels.switches;
        try {
          found = await sentinels.primary();
        } catch (err) {
          if (!this.connecting) throw new Error('Connection is closed.');
          emit('error', err as Error);
          await sleep(backoff.next());
        }
        if (!this.connecting) throw new Error('Connection is closed.');
      }
      const { host, port } = found.primary;
      const stream = sentinels.target.tls ? tls.connect({ host, port, servername: isIp(host) ? undefined : host, ...(tlsOptions ?? {}) }) : net.createConnection({ host, port });
      stream.once('error', (err) => (this.firstError = err));
      this.stream = stream;
      onPrimary(found, switchesBefore);
      return stream;
    }
  };
}
