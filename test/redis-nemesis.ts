/**
 * The faults a real Redis deployment has, for the coordination tests: a TCP
 * proxy between the replicas (ioredis) and redis-server that can
 *
 * - withhold replies: commands still reach Redis and run there, their answers
 *   are swallowed (a reply lost on its way back);
 * - black-hole: nothing goes either way, the sockets stay open (a silent
 *   partition, a dropped route);
 * - reset: every connection is cut at once (a reconnect, a failover);
 *
 * and heal(): the connections that lost bytes are reset (a RESP stream with
 * a hole in it cannot go on: the next answer would be taken for the lost one),
 * and everything passes again. pauseWrites() is `CLIENT PAUSE <ms> WRITE` on a
 * connection of its own: what Redis's FAILOVER does while the replica catches
 * up. All of it in the test process, on loopback.
 */
import net from 'node:net';
import { Redis } from 'ioredis';

export type NemesisMode = 'pass' | 'withhold' | 'blackhole';

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
  /** bytes were dropped on this pipe: it must be reset before it may pass again */
  holed: boolean;
}

export class RedisNemesis {
  private server: net.Server | null = null;
  private readonly pipes = new Set<Pipe>();
  private current: NemesisMode = 'pass';
  /** connections accepted so far: a client that dropped a dead socket comes back as a new one */
  accepted = 0;
  /** connections the client closed itself (it gave up on a dead socket) */
  dropped = 0;
  /** what was done, in order, for a failing test's message */
  readonly log: string[] = [];

  private constructor(
    readonly port: number,
    private readonly targetPort: number,
  ) {}

  /** A proxy on a free loopback port in front of Redis at targetPort. */
  static async start(targetPort: number): Promise<RedisNemesis> {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const nemesis = new RedisNemesis((server.address() as net.AddressInfo).port, targetPort);
    nemesis.server = server;
    server.on('connection', (client) => nemesis.accept(client));
    return nemesis;
  }

  /** The Redis URL through the proxy: the given one (password and all) with the proxy's port. */
  urlFor(redisUrl: string): string {
    const u = new URL(redisUrl);
    u.port = String(this.port);
    return u.toString().replace(/\/$/, '');
  }

  get mode(): NemesisMode {
    return this.current;
  }

  /** Commands go on to Redis; their answers are swallowed. */
  withhold(): void {
    this.note('withhold');
    this.current = 'withhold';
  }

  /** Nothing goes either way; the sockets stay open. */
  blackhole(): void {
    this.note('blackhole');
    this.current = 'blackhole';
  }

  /** Cuts every connection now (the mode stays). */
  reset(): void {
    this.note('reset');
    for (const p of [...this.pipes]) this.cut(p);
  }

  /** Resets the connections that lost bytes, then lets everything pass. */
  heal(): void {
    this.note('heal');
    this.current = 'pass';
    for (const p of [...this.pipes]) if (p.holed) this.cut(p);
  }

  get connections(): number {
    return this.pipes.size;
  }

  async close(): Promise<void> {
    for (const p of [...this.pipes]) this.cut(p);
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }

  private accept(client: net.Socket): void {
    this.accepted++;
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    const pipe: Pipe = { client, upstream, holed: false };
    this.pipes.add(pipe);
    for (const s of [client, upstream]) {
      s.on('error', () => undefined);
      s.on('close', () => {
        if (s === client && this.pipes.has(pipe)) this.dropped++;
        this.cut(pipe);
      });
    }
    client.on('data', (d: Buffer) => {
      if (this.current === 'blackhole') pipe.holed = true;
      else upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (this.current === 'pass' && !pipe.holed) client.write(d);
      else pipe.holed = true;
    });
  }

  private cut(p: Pipe): void {
    if (!this.pipes.delete(p)) return;
    p.client.destroy();
    p.upstream.destroy();
  }

  private note(what: string): void {
    this.log.push(`${new Date().toISOString().slice(11, 23)} ${what}`);
  }
}

/** `CLIENT PAUSE <ms> WRITE` on a connection of its own (closed after): writes wait, reads are answered. */
export async function pauseWrites(redisUrl: string, ms: number): Promise<void> {
  const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  admin.on('error', () => undefined);
  try {
    await admin.connect();
    await admin.call('CLIENT', 'PAUSE', String(ms), 'WRITE');
  } finally {
    admin.disconnect();
  }
}
