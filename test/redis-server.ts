/**
 * A real Redis for the coordination tests: Debian's redis-server on a free
 * loopback port with a temporary directory, stopped after the suite. It can be
 * stopped and started again mid-test on the same port with its data (append
 * only file, unless persist is false), or frozen (SIGSTOP: sockets open, no answers). Optional: a
 * password (requirepass) and TLS (a private CA from tls-certs.ts).
 *
 * Without redis-server the suites are skipped, unless CHARGING_REQUIRE_REDIS
 * is set (.ci/run sets it), which turns the skip into a failure.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { monitorRedis, type RedisMonitor } from './redis-monitor';

export const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/sbin/redis-server', '/usr/local/bin/redis-server'].find((p) => fs.existsSync(p));

export interface RedisServerOptions {
  /** requirepass */
  password?: string;
  /** keep the data across stop()/start() in an append-only file (default true); false: no persistence, as a cache */
  persist?: boolean;
  /** TLS only (no plain port): server certificate and key, and the CA that signed them */
  tls?: { cert: Buffer; key: Buffer; ca: Buffer };
}

/** In a before() hook: skips the suite when redis-server is missing, or fails it when it is required. */
export function requireRedis(ctx: Mocha.Context): void {
  if (REDIS_SERVER) return;
  if (process.env.CHARGING_REQUIRE_REDIS) throw new Error('redis-server is required (CHARGING_REQUIRE_REDIS) but is not installed: apt-get install redis-server');
  console.log('    skipped: redis-server is not installed (apt-get install redis-server)');
  ctx.skip();
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export class RedisServer {
  private proc: ChildProcess | null = null;
  private readonly admins: Redis[] = [];

  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly options: RedisServerOptions,
  ) {}

  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    if (!REDIS_SERVER) throw new Error('redis-server is not installed');
    const server = new RedisServer(await freePort(), fs.mkdtempSync(path.join(os.tmpdir(), 'charging-redis-')), options);
    await server.startProcess();
    return server;
  }

  /** redis:// (or rediss://) URL with the password, as a user would configure it. */
  get url(): string {
    const auth = this.options.password ? `:${encodeURIComponent(this.options.password)}@` : '';
    return `${this.options.tls ? 'rediss' : 'redis'}://${auth}127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc !== null;
  }

  /** A plain ioredis client for the test's own looks at Redis (closed with the server). */
  admin(): Redis {
    const r = new Redis({
      host: '127.0.0.1',
      port: this.port,
      password: this.options.password,
      tls: this.options.tls ? { ca: this.options.tls.ca } : undefined,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
    });
    r.on('error', () => undefined);
    this.admins.push(r);
    return r;
  }

  /** MONITOR on a socket of its own (test/redis-monitor.ts); plain connections only. */
  monitor(onCommand: (args: string[]) => void): Promise<RedisMonitor> {
    if (this.options.tls) return Promise.reject(new Error('monitor() is for plain connections'));
    return monitorRedis(this.port, this.options.password, onCommand);
  }

  /** Stops Redis (SIGTERM: it writes its data and exits); start() brings it back with the data. */
  async stop(): Promise<void> {
    const p = this.proc;
    if (!p) return;
    this.proc = null;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGCONT');
      p.kill('SIGTERM');
    });
  }

  async start(): Promise<void> {
    if (!this.proc) await this.startProcess();
  }

  /** Freezes Redis: connections stay open and nothing is answered (a hung server, a paused VM). */
  freeze(): void {
    this.proc?.kill('SIGSTOP');
  }

  thaw(): void {
    this.proc?.kill('SIGCONT');
  }

  async close(): Promise<void> {
    for (const a of this.admins.splice(0)) a.disconnect();
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private args(): string[] {
    // everysec: Redis writes the file on SIGTERM before it exits, so stop()/start() keeps everything.
    const persist = this.options.persist === false ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', 'everysec'];
    const a = ['--bind', '127.0.0.1', '--dir', this.dir, '--save', '', ...persist, '--protected-mode', 'no', '--daemonize', 'no', '--logfile', ''];
    if (this.options.password) a.push('--requirepass', this.options.password);
    const tls = this.options.tls;
    if (!tls) return [...a, '--port', String(this.port)];
    const f = (name: string, data: Buffer) => {
      const file = path.join(this.dir, name);
      fs.writeFileSync(file, data);
      return file;
    };
    return [...a, '--port', '0', '--tls-port', String(this.port), '--tls-cert-file', f('server.pem', tls.cert), '--tls-key-file', f('server.key', tls.key), '--tls-ca-cert-file', f('ca.pem', tls.ca), '--tls-auth-clients', 'no'];
  }

  private async startProcess(): Promise<void> {
    const proc = spawn(REDIS_SERVER as string, this.args(), { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`redis-server did not start within 10 s:\n${log.slice(-2000)}`)), 10_000);
      const onData = (d: Buffer) => {
        log += d.toString();
        if (/Ready to accept connections/.test(log)) {
          clearTimeout(timer);
          proc.stdout?.off('data', onData);
          proc.stdout?.resume();
          proc.stderr?.resume();
          resolve();
        }
      };
      const fail = (err: Error) => {
        clearTimeout(timer);
        proc.kill('SIGKILL');
        reject(err);
      };
      proc.stdout?.on('data', onData);
      proc.stderr?.on('data', (d: Buffer) => (log += d.toString()));
      proc.once('exit', (code) => fail(new Error(`redis-server exited (${code}):\n${log.slice(-2000)}`)));
    });
    proc.removeAllListeners('exit');
    this.proc = proc;
  }
}
