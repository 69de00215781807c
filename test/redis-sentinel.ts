/**
 * A real Redis Sentinel deployment for the coordination tests: a primary, a
 * replica and three sentinels, each its own `redis-server` process (the
 * sentinels as `redis-server <conf> --sentinel`, what Debian's redis-sentinel
 * runs) on a free loopback port with a temporary directory. Data nodes and
 * sentinels have their own passwords. Quick timings: a primary is judged down
 * after 1 s, so a kill -9 is failed over within about 2-3 s.
 *
 * - failover(): `SENTINEL FAILOVER`, and waits for `+switch-master`;
 * - killPrimary(): kill -9 of the primary, and waits for the promotion;
 * - restartOld(): the killed server back on its port (the sentinels make it a
 *   replica of the new primary), as an operator's service manager would;
 * - url(): the redis-sentinel:// URL a user writes.
 *
 * Without redis-server the suites skip (or fail under CHARGING_REQUIRE_REDIS,
 * as with test/redis-server.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { REDIS_SERVER } from './redis-server';
import { freePort } from './harness';

export const PRIMARY_NAME = 'chargemain';

export interface SentinelOptions {
  /** the data nodes' requirepass / masterauth */
  password?: string;
  /** the sentinels' requirepass */
  sentinelPassword?: string;
  /** the primary judged down after this long without an answer (default 1000 ms) */
  downAfterMs?: number;
  /** data nodes with appendonly (default false: a cache, as the nemesis runs it) */
  persist?: boolean;
}

/** One redis-server process (a data node or a sentinel) on its port, restartable. */
class Proc {
  proc: ChildProcess | null = null;
  log = '';
  constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: () => string[],
    private readonly ready: RegExp,
  ) {}

  get running(): boolean {
    return this.proc !== null;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  async start(): Promise<void> {
    if (this.proc) return;
    const proc = spawn(REDIS_SERVER as string, this.args(), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`redis-server on ${this.port} did not start within 10 s:\n${this.log.slice(-2000)}`)), 10_000);
      const fail = (err: Error) => {
        clearTimeout(timer);
        proc.kill('SIGKILL');
        reject(err);
      };
      proc.stdout?.on('data', (d: Buffer) => {
        this.log = (this.log + d.toString()).slice(-200_000);
        if (this.ready.test(this.log)) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.stderr?.on('data', (d: Buffer) => (this.log += d.toString()));
      proc.once('exit', (code) => fail(new Error(`redis-server on ${this.port} exited (${code}):\n${this.log.slice(-2000)}`)));
    });
    proc.removeAllListeners('exit');
    this.proc = proc;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const p = this.proc;
    if (!p) return;
    this.proc = null;
    await new Promise<void>((resolve) => {
      if (p.exitCode !== null || p.signalCode !== null) return resolve();
      p.once('exit', () => resolve());
      p.kill('SIGCONT');
      p.kill(signal);
    });
  }
}

export class RedisSentinel {
  /** the data nodes, by port; which one is primary changes with failovers */
  readonly nodes: Proc[];
  readonly sentinels: Proc[];
  private readonly admins: Redis[] = [];

  private constructor(
    readonly dir: string,
    nodes: Proc[],
    sentinels: Proc[],
    readonly options: SentinelOptions,
  ) {
    this.nodes = nodes;
    this.sentinels = sentinels;
  }

  static async start(options: SentinelOptions = {}): Promise<RedisSentinel> {
    if (!REDIS_SERVER) throw new Error('redis-server is not installed');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-sentinel-'));
    const ports = [await freePort(), await freePort()];
    const nodes = ports.map((port, i) => new Proc(port, path.join(dir, `node-${i}`), () => dataArgs(port, path.join(dir, `node-${i}`), options, i === 0 ? null : ports[0]), /Ready to accept connections/));
    for (const n of nodes) fs.mkdirSync(n.dir);
    const sentinels: Proc[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const sdir = path.join(dir, `sentinel-${i}`);
      fs.mkdirSync(sdir);
      const conf = path.join(sdir, 'sentinel.conf');
      fs.writeFileSync(conf, sentinelConf(port, sdir, ports[0], options));
      sentinels.push(new Proc(port, sdir, () => [conf, '--sentinel'], /\+monitor master/));
    }
    const s = new RedisSentinel(dir, nodes, sentinels, options);
    try {
      for (const n of nodes) await n.start();
      for (const x of sentinels) await x.start();
      await s.untilSettled();
    } catch (err) {
      await s.close();
      throw err;
    }
    return s;
  }

  /** redis-sentinel://[:password@]127.0.0.1:a,127.0.0.1:b,127.0.0.1:c/<name>[?sentinelPassword=…], as a user writes it. */
  url(extra: { sentinelPassword?: string | null; name?: string; db?: number; sentinels?: number[] } = {}): string {
    const auth = this.options.password ? `:${encodeURIComponent(this.options.password)}@` : '';
    const hosts = (extra.sentinels ?? this.sentinels.map((x) => x.port)).map((p) => `127.0.0.1:${p}`).join(',');
    const q = new URLSearchParams();
    const sp = extra.sentinelPassword === undefined ? this.options.sentinelPassword : extra.sentinelPassword;
    if (sp) q.set('sentinelPassword', sp);
    if (extra.db) q.set('db', String(extra.db));
    const query = q.toString();
    return `redis-sentinel://${auth}${hosts}/${extra.name ?? PRIMARY_NAME}${query ? `?${query}` : ''}`;
  }

  /** The data node the sentinels name as primary now (asked of the first sentinel that answers). */
  async primaryPort(): Promise<number> {
    for (const x of this.sentinels) {
      if (!x.running) continue;
      try {
        const got = (await this.sentinel(x).call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', PRIMARY_NAME)) as [string, string] | null;
        if (got) return Number(got[1]);
      } catch {
        // the next one
      }
    }
    throw new Error('no sentinel names a primary');
  }

  get primary(): Proc {
    return this.nodeByPort(this.currentPrimary);
  }

  /** Asks the sentinels which node is primary now (they may have failed over on their own). */
  async refresh(): Promise<number> {
    this.currentPrimary = await this.primaryPort().catch(() => this.currentPrimary);
    return this.currentPrimary;
  }

  /** The port of the node last known as primary (updated by failover(), killPrimary(), refresh()). */
  currentPrimary: number = 0;

  /** A plain client of a data node (closed with the deployment). */
  admin(port = this.currentPrimary): Redis {
    const r = new Redis({ host: '127.0.0.1', port, password: this.options.password, maxRetriesPerRequest: 1, retryStrategy: () => 200, lazyConnect: false });
    r.on('error', () => undefined);
    this.admins.push(r);
    return r;
  }

  /** A client of a sentinel (closed with the deployment). */
  sentinel(x: Proc): Redis {
    const r = new Redis({ host: '127.0.0.1', port: x.port, password: this.options.sentinelPassword, maxRetriesPerRequest: 1, retryStrategy: () => null, commandTimeout: 2000 });
    r.on('error', () => undefined);
    this.admins.push(r);
    return r;
  }

  /**
   * SENTINEL FAILOVER (the primary alive: the sentinels promote the replica
   * and demote the old primary some seconds later), and waits until every
   * sentinel names the new primary. Returns when the switch was seen (ms).
   */
  async failover(): Promise<{ from: number; to: number; askedAt: number; switchedAt: number }> {
    await this.settle();
    const from = this.currentPrimary;
    const watcher = await this.watchSwitch();
    const asked = this.sentinels.find((x) => x.running) as Proc;
    const askedAt = Date.now();
    await this.sentinel(asked).call('SENTINEL', 'FAILOVER', PRIMARY_NAME);
    const switchedAt = await watcher.seen;
    await this.untilAllName((p) => p !== from);
    return { from, to: this.currentPrimary, askedAt, switchedAt };
  }

  /** redis://:password@127.0.0.1:<primary>: the primary itself, as a plain client reaches it. */
  get primaryUrl(): string {
    const auth = this.options.password ? `:${encodeURIComponent(this.options.password)}@` : '';
    return `redis://${auth}127.0.0.1:${this.currentPrimary}`;
  }

  /** kill -9 of the primary; waits for the promotion of the replica (every sentinel names it). */
  async killPrimary(): Promise<{ from: number; to: number; killedAt: number; switchedAt: number }> {
    await this.settle();
    const from = this.currentPrimary;
    const watcher = await this.watchSwitch();
    const killedAt = Date.now();
    await this.nodeByPort(from).stop('SIGKILL');
    const switchedAt = await watcher.seen;
    await this.untilAllName((p) => p !== from);
    return { from, to: this.currentPrimary, killedAt, switchedAt };
  }

  /** A stopped data node back on its port, as a replica of the current primary (the sentinels would make it one). */
  async restartStopped(): Promise<void> {
    for (const n of this.nodes) {
      if (n.running) continue;
      const primary = this.currentPrimary;
      (n as unknown as { args: () => string[] }).args = () => dataArgs(n.port, n.dir, this.options, primary);
      await n.start();
    }
  }

  /** Data node SIGSTOP/SIGCONT (a frozen primary). */
  freeze(port = this.currentPrimary): void {
    this.nodeByPort(port).proc?.kill('SIGSTOP');
  }

  thaw(port = this.currentPrimary): void {
    this.nodeByPort(port).proc?.kill('SIGCONT');
  }

  async close(): Promise<void> {
    for (const a of this.admins.splice(0)) a.disconnect();
    for (const x of this.sentinels) await x.stop('SIGKILL');
    for (const n of this.nodes) await n.stop('SIGKILL');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Subscribed: `seen` resolves (with the time) at the first +switch-master a sentinel publishes. */
  private async watchSwitch(): Promise<{ seen: Promise<number> }> {
    const subs = this.sentinels.filter((x) => x.running).map((x) => this.sentinel(x));
    await Promise.all(subs.map((s) => s.subscribe('+switch-master')));
    const seen = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error('no +switch-master within 30 s')), 30_000);
      const done = (err: Error | null) => {
        clearTimeout(timer);
        for (const s of subs) s.disconnect();
        if (err) reject(err);
        else resolve(Date.now());
      };
      for (const s of subs) s.on('message', (channel: string, text: string) => channel === '+switch-master' && text.startsWith(`${PRIMARY_NAME} `) && done(null));
    });
    return { seen };
  }

  private async untilAllName(ok: (port: number) => boolean, timeoutMs = 20_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const named: number[] = [];
      for (const x of this.sentinels.filter((s) => s.running)) {
        const c = this.sentinel(x);
        try {
          const got = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', PRIMARY_NAME)) as [string, string] | null;
          if (got) named.push(Number(got[1]));
        } catch {
          // counted as not yet
        } finally {
          c.disconnect();
        }
      }
      if (named.length === this.sentinels.filter((s) => s.running).length && named.every((p) => p === named[0] && ok(p))) {
        this.currentPrimary = named[0];
        return;
      }
      if (Date.now() > end) throw new Error(`the sentinels do not agree on a primary within ${timeoutMs} ms: ${named.join(', ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The sentinels see the replica and each other (a failover needs both). */
  private async untilSettled(): Promise<void> {
    this.currentPrimary = this.nodes[0].port;
    const end = Date.now() + 20_000;
    for (;;) {
      let ready = 0;
      for (const x of this.sentinels) {
        const c = this.sentinel(x);
        try {
          const master = pack((await c.call('SENTINEL', 'MASTER', PRIMARY_NAME)) as string[]);
          if (Number(master['num-slaves']) >= 1 && Number(master['num-other-sentinels']) >= 2) ready++;
        } catch {
          // not yet
        } finally {
          c.disconnect();
        }
      }
      if (ready === this.sentinels.length && (await this.replicaInSync())) return;
      if (Date.now() > end) throw new Error('the sentinels did not find the replica and each other, or the replica is not in sync, within 20 s');
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /**
   * Every running data node other than the primary is its replica, in sync:
   * a demoted primary is made one at once (the sentinels would, some 10 s
   * after a failover), so that the next failover promotes a node that has
   * the data.
   */
  async settle(): Promise<void> {
    const end = Date.now() + 20_000;
    // The sentinels may have failed over on their own since (a primary paused past down-after-milliseconds).
    await this.refresh();
    for (const n of this.nodes.filter((x) => x.running && x.port !== this.currentPrimary)) {
      const c = new Redis({ host: '127.0.0.1', port: n.port, password: this.options.password, maxRetriesPerRequest: 1, retryStrategy: () => null, commandTimeout: 2000 });
      c.on('error', () => undefined);
      try {
        const info = await c.info('replication');
        if (!new RegExp(`master_port:${this.currentPrimary}\\b`).test(info)) await c.call('REPLICAOF', '127.0.0.1', String(this.currentPrimary));
      } finally {
        c.disconnect();
      }
    }
    while (!(await this.replicaInSync()) || !(await this.sentinelsSeeReplica())) {
      if (Date.now() > end) throw new Error('the replica is not in sync, or the sentinels do not see it healthy, within 20 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Every running sentinel lists a healthy replica of the current primary (what a failover needs). */
  private async sentinelsSeeReplica(): Promise<boolean> {
    for (const x of this.sentinels.filter((y) => y.running)) {
      const c = this.sentinel(x);
      try {
        const replicas = ((await c.call('SENTINEL', 'REPLICAS', PRIMARY_NAME)) as string[][]).map(pack);
        if (!replicas.some((r) => !/s_down|o_down|disconnected/.test(r.flags) && r['master-link-status'] === 'ok' && Number(r['master-port']) === this.currentPrimary)) return false;
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    }
    return true;
  }

  /** Every running replica's link to the primary is up. */
  async replicaInSync(): Promise<boolean> {
    for (const n of this.nodes.filter((x) => x.running && x.port !== this.currentPrimary)) {
      const c = new Redis({ host: '127.0.0.1', port: n.port, password: this.options.password, maxRetriesPerRequest: 1, retryStrategy: () => null, commandTimeout: 2000 });
      c.on('error', () => undefined);
      try {
        if (!/master_link_status:up/.test(await c.info('replication'))) return false;
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    }
    return true;
  }

  private nodeByPort(port: number): Proc {
    const n = this.nodes.find((x) => x.port === port);
    if (!n) throw new Error(`no data node on ${port}`);
    return n;
  }
}

function pack(flat: string[]): Record<string, string> {
  const o: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
}

function dataArgs(port: number, dir: string, options: SentinelOptions, primaryPort: number | null): string[] {
  const persist = options.persist ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no'];
  const a = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...persist, '--protected-mode', 'no', '--daemonize', 'no', '--logfile', '', '--repl-diskless-sync-delay', '0'];
  if (options.password) a.push('--requirepass', options.password, '--masterauth', options.password);
  if (primaryPort !== null) a.push('--replicaof', '127.0.0.1', String(primaryPort));
  return a;
}

function sentinelConf(port: number, dir: string, primaryPort: number, options: SentinelOptions): string {
  const lines = [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    'protected-mode no',
    'daemonize no',
    'logfile ""',
    `sentinel monitor ${PRIMARY_NAME} 127.0.0.1 ${primaryPort} 2`,
    `sentinel down-after-milliseconds ${PRIMARY_NAME} ${options.downAfterMs ?? 1000}`,
    `sentinel failover-timeout ${PRIMARY_NAME} 10000`,
    `sentinel parallel-syncs ${PRIMARY_NAME} 1`,
  ];
  if (options.password) lines.push(`sentinel auth-pass ${PRIMARY_NAME} ${options.password}`);
  if (options.sentinelPassword) lines.push(`requirepass ${options.sentinelPassword}`, `sentinel sentinel-pass ${options.sentinelPassword}`);
  return `${lines.join('\n')}\n`;
}
