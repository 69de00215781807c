/**
 * The simulator's HTTP(S) server: connections, keep-alive (normal, or the
 * idle-close fault), request bodies read and recorded, then handed on.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { RecordedRequest, SimulatorCounters, SimulatorOptions } from './types';

/** Bodies above this are answered 413 (still read, not kept). */
export const MAX_BODY_BYTES = 64 * 1024;

export type RequestHandler = (rec: RecordedRequest, tooLarge: boolean, req: http.IncomingMessage, res: http.ServerResponse) => void;

export interface ServerSettings {
  host: string;
  port: number;
  tls?: SimulatorOptions['tls'];
  /** the normal keep-alive timeout, announced as Keep-Alive: timeout= */
  keepAliveTimeoutMs: number;
  /** idle-close from the start (null: normal keep-alive) */
  idleCloseMs: number | null;
}

export class SimulatorServer {
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly idleTimers = new WeakMap<Socket, NodeJS.Timeout>();
  private concurrent = 0;
  /** idle-close in force: ms, or null for the normal keep-alive with its hint */
  private idleCloseMs: number | null;

  constructor(
    private readonly settings: ServerSettings,
    private readonly counters: SimulatorCounters,
    private readonly now: () => number,
    private readonly onRequest: RequestHandler,
  ) {
    this.idleCloseMs = settings.idleCloseMs;
  }

  get port(): number {
    return this.settings.port;
  }

  get url(): string {
    const h = this.settings.host.includes(':') ? `[${this.settings.host}]` : this.settings.host;
    return `${this.settings.tls ? 'https' : 'http'}://${h}:${this.settings.port}`;
  }

  async start(): Promise<void> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    const tls = this.settings.tls;
    // requestCert: a server that requires a client certificate signed by tls.ca, and refuses the handshake without one.
    const server = tls
      ? https.createServer({ key: tls.key, cert: tls.cert, ca: tls.ca, requestCert: tls.requestCert ?? false, rejectUnauthorized: tls.requestCert ?? false }, handler)
      : http.createServer(handler);
    server.on('connection', (s: Socket) => {
      this.counters.connections++;
      this.sockets.add(s);
      s.on('close', () => {
        this.sockets.delete(s);
        clearTimeout(this.idleTimers.get(s));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.settings.port, this.settings.host, () => resolve());
    });
    this.server = server;
    this.applyKeepAlive();
    this.settings.port = (server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** idle-close from now on (ms), or the normal keep-alive with its hint (null). */
  setIdleClose(ms: number | null): void {
    this.idleCloseMs = ms;
    this.applyKeepAlive();
  }

  get idleClose(): number | null {
    return this.idleCloseMs;
  }

  /** Sets the server's keep-alive timeout for the mode in force; Node reads it at each answer's end. */
  private applyKeepAlive(): void {
    if (this.server) this.server.keepAliveTimeout = this.idleCloseMs ?? this.settings.keepAliveTimeoutMs;
  }

  /**
   * idle-close: the connection closes idleCloseMs after an answer unless another
   * request came. Node's own keep-alive timer waits a second longer than its
   * setting (to dodge exactly this race), so the simulator keeps its own.
   */
  private idleWatch(socket: Socket, res: http.ServerResponse): void {
    clearTimeout(this.idleTimers.get(socket));
    res.on('finish', () => {
      if (this.idleCloseMs === null || socket.destroyed) return;
      this.idleTimers.set(socket, setTimeout(() => socket.destroy(), this.idleCloseMs));
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.concurrent++;
    this.counters.peakConcurrent = Math.max(this.counters.peakConcurrent, this.concurrent);
    let counted = true;
    res.on('close', () => {
      if (counted) this.concurrent--;
      counted = false;
    });
    this.idleWatch(req.socket, res);
    if (this.idleCloseMs !== null && !/close/i.test(req.headers.connection ?? '') && req.httpVersion === '1.1') {
      // Node adds "Keep-Alive: timeout=N" only when it writes the Connection header itself: writing it here leaves the hint out.
      res.setHeader('Connection', 'keep-alive');
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://sim');
      const rec: RecordedRequest = {
        method: req.method ?? 'GET',
        path: url.pathname,
        query: Object.fromEntries(url.searchParams.entries()),
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: this.now(),
      };
      this.onRequest(rec, size > MAX_BODY_BYTES, req, res);
    });
  }
}
