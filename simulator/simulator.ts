/**
 * A standalone HTTP server that behaves like the Charging Session Remote-Control
 * Service and its token endpoint (service-spec.md), with fault injection.
 * Used by the tests, the demo (`npm start`) and the soak. No Node-RED in here.
 */
import http from 'node:http';
import https from 'node:https';
import crypto from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';

export type FaultTarget = 'token' | 'get' | 'post' | 'service' | 'any';

export type FaultKind =
  // Before the request is handled (a POST is not processed unless afterProcessing):
  | 'latency' // answer normally after delayMs
  | 'hang' // never answer (the socket stays open until the client gives up)
  | 'reset' // destroy the connection without an answer
  | 'status' // answer with status, body, headers
  | 'revoke' // revoke the caller's (valid) token first: 401 follows
  // Corrupting the real answer (a POST is processed first: its 2xx means the station got it):
  | 'malformed' // the real status, a body that is not JSON
  | 'cut' // the real status and Content-Length, half the body, then the connection closes
  | 'truncated' // the same as cut (older name)
  | 'huge' // the real status with a body of hugeBytes
  | 'drip' // the real status and headers at once, then the body one byte every delayMs (default 400)
  | 'deep' // the real answer with a field nested depth levels (default 5000)
  | 'echo' // the real answer with the request's Authorization header and body inside; with status, an error that echoes them
  // An API gateway in front of the service:
  | 'route-404' // a gateway that lost its route: 404 for the request, Kong's JSON body (format 'html': nginx's HTML page)
  // Beside the answer (do not use up or block the faults above):
  | 'close-after-answer' // the real answer, then the server closes the connection, with no Connection: close
  | 'ignore-stop' // the station ignores an accepted STOP: 202 as usual, the session goes on (times: how many STOPs)
  | 'idle-close'; // server setting until cleared: idle keep-alive connections close after delayMs, with no Keep-Alive hint

/** Faults that change the real answer rather than replace or delay it. */
export const ANSWER_FAULTS: ReadonlySet<FaultKind> = new Set(['malformed', 'cut', 'truncated', 'huge', 'drip', 'deep', 'echo']);

/**
 * Faults that act beside the answer: each is looked up on its own, so an
 * "always" close-after-answer does not hide a status fault armed after it.
 */
export const SIDE_FAULTS: ReadonlySet<FaultKind> = new Set(['close-after-answer', 'ignore-stop', 'idle-close']);

export interface FaultRule {
  target: FaultTarget;
  kind: FaultKind;
  /** how many matching requests it applies to; default 1, Infinity for "until cleared" */
  times?: number;
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  delayMs?: number;
  hugeBytes?: number;
  /** nesting of the 'deep' fault */
  depth?: number;
  /** route-404: 'json' (Kong's body, default) or 'html' (nginx's page) */
  format?: 'json' | 'html';
  /**
   * For POST and the faults that replace or delay the answer: act on the command
   * first, then fail the answer (the station got the request; the client cannot
   * know). Default false: fail before processing. Faults that corrupt the real
   * answer always process the command first.
   */
  afterProcessing?: boolean;
  /** internal: how many times it has applied */
  applied?: number;
}

export interface SimulatorOptions {
  host?: string;
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** scopes a client may ask for; empty: any */
  allowedScopes?: string[];
  /**
   * The client authentication the token endpoint accepts (RFC 6749 §2.3.1):
   * basic (the spec's raw Basic value, default), basic-form-encoded (each part
   * form-urlencoded first, as standard OAuth servers decode it), client_secret_post.
   */
  authMethod?: 'basic' | 'basic-form-encoded' | 'client_secret_post';
  tokenLifetimeSec?: number;
  /** leave expires_in out of the token response */
  omitExpiresIn?: boolean;
  /** what expires_in says, when it should differ from the real lifetime (a server that understates it) */
  advertisedLifetimeSec?: number;
  /** after START: the record has no transactionData for this long */
  startDelayMs?: number;
  /** after STOP: the session stays visible (meter frozen) for this long, then is gone */
  stopDelayMs?: number;
  /** charging power used to advance the meter, W */
  powerW?: number;
  /** what GET answers when no session matches */
  noSession?: '404' | '204' | 'empty200';
  /** body of the 202 */
  acceptBody?: 'empty' | 'json';
  /** how many recent requests to keep for inspection */
  keepRequests?: number;
  /**
   * Serve https with this key and certificate (PEM). ca: the CAs that client
   * certificates are checked against; requestCert: a server that requires a
   * valid client certificate (the handshake fails without one).
   */
  tls?: { key: string | Buffer; cert: string | Buffer; ca?: string | Buffer | Array<string | Buffer>; requestCert?: boolean };
  /** how long an idle keep-alive connection stays open, ms (default 5000, announced as Keep-Alive: timeout=5) */
  keepAliveTimeoutMs?: number;
  /**
   * The idle-close fault from the start: idle keep-alive connections close after
   * this many ms and no Keep-Alive: timeout= hint is sent (embedded servers, some gateways).
   */
  idleCloseMs?: number;
  now?: () => number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

interface Arrivals {
  all: number;
  /** arrivals not refused with 401 or 429 */
  taken: number;
  duplicates: number;
}

interface Session {
  locationId: string;
  evseId: string;
  token: string;
  locationUid: string;
  createdAt: number;
  startedAt: number;
  transactionId: string;
  cdrId: string;
  meterStart: number;
  powerW: number;
  stoppedAt: number | null;
}

export interface SimulatorCounters {
  tokenRequests: number;
  tokensIssued: number;
  starts: number;
  stops: number;
  progressQueries: number;
  /** a START for a token whose session was already active: what the soak counts as a duplicate */
  duplicateStarts: number;
  /** a STOP for a session already stopping */
  duplicateStops: number;
  unauthorized: number;
  faultsApplied: number;
  /** TCP connections accepted */
  connections: number;
  /** most requests being handled at the same moment */
  peakConcurrent: number;
  /** every START that arrived, whatever it was answered (faults included) */
  startArrivals: number;
  /** every STOP that arrived, whatever it was answered */
  stopArrivals: number;
  /**
   * Arrivals of a START already seen (same token, locationId and evseId) whatever
   * either was answered, unless every earlier arrival was refused with 401 or 429
   * (the service said it did not act: sending it again is allowed).
   */
  duplicateStartArrivals: number;
  /** the same for STOP (same transactionId): a second STOP answered 404 "already stopped" counts */
  duplicateStopArrivals: number;
}

/** The identity of a command, for counting arrivals: START by token, locationId and evseId; STOP by transactionId. */
export function commandKey(cmd: Record<string, unknown>): { action: 'START' | 'STOP'; key: string } | null {
  if (cmd.action === 'START') return { action: 'START', key: `${String(cmd.token)}|${String(cmd.locationId)}|${String(cmd.evseId)}` };
  if (cmd.action === 'STOP') return { action: 'STOP', key: String(cmd.transactionId ?? `token:${String(cmd.token)}`) };
  return null;
}

export const SESSIONS_PATH = '/poi/v1/charging-sessions';
export const TOKEN_PATH = '/auth/v1/token';

export class ChargingServiceSimulator {
  readonly options: Required<Omit<SimulatorOptions, 'now' | 'port' | 'host' | 'tls' | 'idleCloseMs'>> & { host: string; port: number };
  private readonly tls?: SimulatorOptions['tls'];
  readonly counters: SimulatorCounters = emptyCounters();
  readonly requests: RecordedRequest[] = [];
  private readonly tokens = new Map<string, { expiresAt: number; revoked: boolean }>();
  private readonly sessions = new Map<string, Session>();
  private faults: FaultRule[] = [];
  private readonly arrived = { START: new Map<string, Arrivals>(), STOP: new Map<string, Arrivals>() };
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly now: () => number;
  private meterSeed = 12_000;

  constructor(opts: SimulatorOptions = {}) {
    this.options = {
      host: opts.host ?? '127.0.0.1',
      port: opts.port ?? 0,
      clientId: opts.clientId ?? 'demo-client',
      clientSecret: opts.clientSecret ?? 'demo-secret',
      allowedScopes: opts.allowedScopes ?? [],
      authMethod: opts.authMethod ?? 'basic',
      tokenLifetimeSec: opts.tokenLifetimeSec ?? 1800,
      omitExpiresIn: opts.omitExpiresIn ?? false,
      advertisedLifetimeSec: opts.advertisedLifetimeSec ?? opts.tokenLifetimeSec ?? 1800,
      startDelayMs: opts.startDelayMs ?? 1000,
      stopDelayMs: opts.stopDelayMs ?? 1000,
      powerW: opts.powerW ?? 11_000,
      noSession: opts.noSession ?? '404',
      acceptBody: opts.acceptBody ?? 'empty',
      keepRequests: opts.keepRequests ?? 1000,
      keepAliveTimeoutMs: opts.keepAliveTimeoutMs ?? 5_000,
    };
    this.now = opts.now ?? Date.now;
    this.tls = opts.tls;
    this.initialIdleCloseMs = opts.idleCloseMs ?? null;
    this.idleCloseMs = this.initialIdleCloseMs;
  }

  private readonly initialIdleCloseMs: number | null;
  /** idle-close in force: ms, or null for the normal keep-alive with its hint */
  private idleCloseMs: number | null;

  /** Sets the server's keep-alive timeout for the mode in force; Node reads it at each answer's end. */
  private applyKeepAlive(): void {
    if (!this.server) return;
    this.server.keepAliveTimeout = this.idleCloseMs ?? this.options.keepAliveTimeoutMs;
  }

  async start(): Promise<this> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    const tls = this.tls;
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
      server.listen(this.options.port, this.options.host, () => resolve());
    });
    this.server = server;
    this.applyKeepAlive();
    this.options.port = (server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  get url(): string {
    const h = this.options.host.includes(':') ? `[${this.options.host}]` : this.options.host;
    return `${this.tls ? 'https' : 'http'}://${h}:${this.options.port}`;
  }

  /** What a charging-service config node should be given. */
  get baseUrl(): string {
    return this.url;
  }

  get authUrl(): string {
    return `${this.url}/auth`;
  }

  /** Adds a fault; it applies to the next `times` matching requests. */
  inject(rule: FaultRule): void {
    if (rule.kind === 'idle-close') {
      // A server setting, not a per-request fault: in force until clearFaults().
      this.idleCloseMs = rule.delayMs ?? 1000;
      this.applyKeepAlive();
      return;
    }
    this.faults.push({ times: 1, ...rule, applied: 0 });
  }

  /** idle-close from now on (ms), or back to the normal keep-alive with its hint (null), leaving the other faults armed. */
  setIdleClose(ms: number | null): void {
    this.idleCloseMs = ms;
    this.applyKeepAlive();
  }

  clearFaults(): void {
    this.faults = [];
    this.idleCloseMs = this.initialIdleCloseMs;
    this.applyKeepAlive();
  }

  /** The faults armed and not yet used up. */
  pendingFaults(): readonly FaultRule[] {
    return this.faults;
  }

  /** Revoke every token issued so far: the next service request gets 401. */
  revokeAllTokens(): void {
    for (const t of this.tokens.values()) t.revoked = true;
  }

  reset(): void {
    this.clearFaults();
    this.tokens.clear();
    this.sessions.clear();
    this.requests.length = 0;
    this.arrived.START.clear();
    this.arrived.STOP.clear();
    Object.assign(this.counters, emptyCounters());
  }

  /**
   * How many times a command arrived at the simulator, answered or not: START keyed
   * token|locationId|evseId (commandKey), STOP keyed by its transactionId.
   */
  arrivals(action: 'START' | 'STOP', key: string): number {
    return this.arrived[action].get(key)?.all ?? 0;
  }

  /** How many arrivals of this command were duplicates (see SimulatorCounters.duplicateStartArrivals). */
  duplicateArrivals(action: 'START' | 'STOP', key: string): number {
    return this.arrived[action].get(key)?.duplicates ?? 0;
  }

  /**
   * Counts a command at the door, before any fault or check decides its answer.
   * It counts as taken (the station may act on it) unless its answer, sent in
   * full, is 401 or 429: only then may the same message come again without
   * being a duplicate.
   */
  private countArrival(rec: RecordedRequest, res: http.ServerResponse): void {
    let cmd: unknown;
    try {
      cmd = JSON.parse(rec.body);
    } catch {
      return;
    }
    const id = cmd && typeof cmd === 'object' ? commandKey(cmd as Record<string, unknown>) : null;
    if (!id) return;
    let a = this.arrived[id.action].get(id.key);
    if (!a) this.arrived[id.action].set(id.key, (a = { all: 0, taken: 0, duplicates: 0 }));
    const entry = a;
    entry.all++;
    const duplicate = entry.taken > 0;
    if (duplicate) entry.duplicates++;
    entry.taken++;
    res.on('finish', () => {
      if (res.statusCode === 401 || res.statusCode === 429) entry.taken--;
    });
    if (id.action === 'START') {
      this.counters.startArrivals++;
      if (duplicate) this.counters.duplicateStartArrivals++;
    } else {
      this.counters.stopArrivals++;
      if (duplicate) this.counters.duplicateStopArrivals++;
    }
  }

  /** The live session for an RFID token, if any (tests look inside). */
  session(token: string): Readonly<Session> | undefined {
    return this.sessions.get(token);
  }

  activeSessions(): number {
    this.expireSessions();
    return this.sessions.size;
  }

  // ---------------------------------------------------------------- plumbing

  private concurrent = 0;

  private readonly idleTimers = new WeakMap<Socket, NodeJS.Timeout>();

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
    const done = () => {
      if (counted) this.concurrent--;
      counted = false;
    };
    res.on('close', done);
    this.idleWatch(req.socket, res);
    if (this.idleCloseMs !== null && !/close/i.test(req.headers.connection ?? '') && req.httpVersion === '1.1') {
      // Node adds "Keep-Alive: timeout=N" only when it writes the Connection header itself: writing it here leaves the hint out.
      res.setHeader('Connection', 'keep-alive');
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 64 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://sim');
      const body = Buffer.concat(chunks).toString('utf8');
      const rec: RecordedRequest = {
        method: req.method ?? 'GET',
        path: url.pathname,
        query: Object.fromEntries(url.searchParams.entries()),
        headers: req.headers,
        body,
        at: this.now(),
      };
      if (url.pathname.startsWith('/__sim/')) return this.control(rec, res);
      this.requests.push(rec);
      if (this.requests.length > this.options.keepRequests) this.requests.splice(0, this.requests.length - this.options.keepRequests);
      if (size > 64 * 1024) return json(res, 413, { error: 'payload_too_large', message: 'request body over 64 KiB' });
      void this.route(rec, req, res);
    });
  }

  private async route(rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const target: FaultTarget | null =
      rec.path === TOKEN_PATH ? 'token' : rec.path === SESSIONS_PATH ? (rec.method === 'POST' ? 'post' : 'get') : null;
    if (target === 'token') this.counters.tokenRequests++;
    if (target === 'post') this.countArrival(rec, res);
    if (target && this.takeFault(target, 'close-after-answer')) {
      // After the whole answer has reached the kernel: the next request on this pooled socket meets a closed connection.
      res.on('finish', () => req.socket.destroy());
    }
    const fault = target ? this.takeFault(target) : undefined;
    if (fault && target && ANSWER_FAULTS.has(fault.kind)) {
      // The real answer, captured, then corrupted on its way out.
      const answer = new CapturedAnswer();
      this.answer(target, rec, answer);
      return this.corrupt(fault, answer, rec, req, res, target);
    }
    if (fault && !(fault.afterProcessing && target === 'post')) {
      if (await this.applyFault(fault, rec, req, res)) return;
    }
    if (!target) return json(res, 404, { error: 'not_found', message: `no such path ${rec.path}` });
    if (fault && fault.afterProcessing && target === 'post') {
      // The station gets the command; the answer is lost.
      this.answer(target, rec, null);
      await this.applyFault(fault, rec, req, res);
      return;
    }
    this.answer(target, rec, res);
  }

  /** The service's own answer to a request (res null: process only). */
  private answer(target: FaultTarget, rec: RecordedRequest, res: Reply | null): void {
    if (target === 'token') return this.token(rec, res ?? new CapturedAnswer());
    const auth = this.authorise(rec);
    if (auth) {
      this.counters.unauthorized++;
      if (res) json(res, 401, { error: 'unauthorized', message: auth });
      return;
    }
    if (target === 'get') return this.progress(rec, res ?? new CapturedAnswer());
    return this.command(rec, res);
  }

  /** The first armed rule for the target (kind given: of that side fault; none: of the faults that act on the answer), used once. */
  private takeFault(target: FaultTarget, kind?: FaultKind): FaultRule | undefined {
    const rule = this.faults.find(
      (f) =>
        (kind ? f.kind === kind : !SIDE_FAULTS.has(f.kind)) &&
        (f.target === target || f.target === 'any' || (f.target === 'service' && (target === 'get' || target === 'post'))),
    );
    if (!rule) return undefined;
    rule.applied = (rule.applied ?? 0) + 1;
    if (rule.applied >= (rule.times ?? 1)) this.faults.splice(this.faults.indexOf(rule), 1);
    this.counters.faultsApplied++;
    return rule;
  }

  /** Returns true when the fault answered (or killed) the request itself. */
  private async applyFault(f: FaultRule, rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> {
    switch (f.kind) {
      case 'latency':
        await delay(f.delayMs ?? 500);
        return false;
      case 'hang':
        return true; // never answer; stop() destroys the socket
      case 'reset':
        req.socket.destroy();
        return true;
      case 'status': {
        const status = f.status ?? 500;
        res.writeHead(status, { ...(f.body ? { 'Content-Type': f.body.trim().startsWith('{') ? 'application/json' : 'text/plain' } : {}), ...(f.headers ?? {}) });
        res.end(f.body ?? '');
        return true;
      }
      case 'revoke': {
        const bearer = bearerOf(rec);
        const t = bearer ? this.tokens.get(bearer) : undefined;
        if (t) t.revoked = true;
        return false;
      }
      case 'route-404':
        if (f.format === 'html') {
          res.writeHead(404, { 'Content-Type': 'text/html', Server: 'nginx' });
          res.end(NGINX_404);
        } else {
          json(res, 404, { message: 'no Route matched with those values' }, { Server: 'kong/3.9.1' });
        }
        return true;
      default:
        return false;
    }
  }

  /** Sends the real answer, corrupted as the fault says. */
  private async corrupt(f: FaultRule, answer: CapturedAnswer, rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse, target: FaultTarget): Promise<void> {
    // An empty 202 has nothing to corrupt: give it the body a real service might send.
    let body = answer.body || (target === 'post' ? JSON.stringify({ status: 'ACCEPTED' }) : '');
    const type = { 'Content-Type': 'application/json; charset=utf-8' };
    switch (f.kind) {
      case 'malformed':
        res.writeHead(answer.status, type);
        res.end('<html>Service Unavailable</html>');
        return;
      case 'cut':
      case 'truncated': {
        if (body.length < 2) body = JSON.stringify({ status: 'ACCEPTED', padding: 'xxxxxxxx' });
        res.writeHead(answer.status, { ...type, 'Content-Length': String(Buffer.byteLength(body)) });
        res.write(body.slice(0, Math.floor(body.length / 2)));
        setTimeout(() => req.socket.destroy(), 10);
        return;
      }
      case 'huge':
        res.writeHead(answer.status, type);
        res.end(`{"pad":"${'x'.repeat(f.hugeBytes ?? 5 * 1024 * 1024)}"}`);
        return;
      case 'drip': {
        res.writeHead(answer.status, { ...type, 'Content-Length': String(Buffer.byteLength(body)) });
        res.flushHeaders(); // the headers at once, then the body, slowly
        const bytes = Buffer.from(body);
        let i = 0;
        const timer = setInterval(() => {
          if (i >= bytes.length || res.destroyed) {
            clearInterval(timer);
            if (!res.destroyed) res.end();
            return;
          }
          res.write(bytes.subarray(i, ++i));
        }, f.delayMs ?? 400);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case 'deep': {
        const depth = f.depth ?? 5000;
        const nested = `${'{"x":'.repeat(depth)}1${'}'.repeat(depth)}`;
        const base = body.trim().startsWith('{') ? body.trim().slice(0, -1) + (body.trim() === '{}' ? '' : ',') : '{';
        res.writeHead(answer.status, type);
        res.end(`${base}"extra":${nested}}`);
        return;
      }
      case 'echo': {
        const seen = { authorization: rec.headers.authorization ?? null, body: rec.body };
        if (f.status) return json(res, f.status, { error: 'bad_request', message: `rejected request with Authorization: ${seen.authorization} and body ${seen.body}` });
        let value: Record<string, unknown> = {};
        try {
          value = body ? (JSON.parse(body) as Record<string, unknown>) : {};
        } catch {
          // not JSON: replaced
        }
        return json(res, answer.status, { ...value, echo: seen });
      }
    }
    res.writeHead(answer.status, answer.headers);
    res.end(body);
  }

  private control(rec: RecordedRequest, res: http.ServerResponse): void {
    // Loopback-only helper for the CLI and demos: inject faults, read counters.
    if (rec.path === '/__sim/faults' && rec.method === 'POST') {
      try {
        const rule = JSON.parse(rec.body) as FaultRule;
        if (rule.times === null || (rule.times as unknown) === 'Infinity') rule.times = Infinity;
        this.inject(rule);
        return json(res, 200, { ok: true });
      } catch {
        return json(res, 400, { error: 'bad fault rule' });
      }
    }
    if (rec.path === '/__sim/faults' && rec.method === 'DELETE') {
      this.clearFaults();
      return json(res, 200, { ok: true });
    }
    if (rec.path === '/__sim/revoke' && rec.method === 'POST') {
      this.revokeAllTokens();
      return json(res, 200, { ok: true });
    }
    if (rec.path === '/__sim/state') {
      return json(res, 200, { counters: this.counters, activeSessions: this.activeSessions(), faults: this.faults });
    }
    json(res, 404, { error: 'not_found' });
  }

  // ---------------------------------------------------------------- token endpoint (spec §4.3)

  private token(rec: RecordedRequest, res: Reply): void {
    if (rec.method !== 'POST') return json(res, 405, { error: 'invalid_request', error_description: 'use POST' });
    const client = this.clientOf(rec);
    if ('refused' in client) {
      return json(res, 401, { error: 'invalid_client', error_description: client.refused }, this.options.authMethod === 'client_secret_post' ? {} : { 'WWW-Authenticate': 'Basic realm="token"' });
    }
    if (!safeEqual(client.id, this.options.clientId) || !safeEqual(client.secret, this.options.clientSecret)) {
      return json(res, 401, { error: 'invalid_client', error_description: 'client authentication failed' });
    }
    const accept = rec.headers.accept ?? '';
    if (!/application\/json/.test(accept)) return json(res, 406, { error: 'invalid_request', error_description: 'Accept: application/json required' });
    const ctype = rec.headers['content-type'] ?? '';
    if (!/^application\/x-www-form-urlencoded/.test(ctype)) {
      return json(res, 400, { error: 'invalid_request', error_description: 'form-encoded body required' });
    }
    const form = new URLSearchParams(rec.body);
    if (form.get('grant_type') !== 'client_credentials') {
      return json(res, 400, { error: 'unsupported_grant_type', error_description: 'grant_type must be client_credentials' });
    }
    const scopes = (form.get('scope') ?? '').split(' ').filter(Boolean);
    if (this.options.allowedScopes.length > 0) {
      const bad = scopes.filter((s) => !this.options.allowedScopes.includes(s));
      if (bad.length > 0) return json(res, 400, { error: 'invalid_scope', error_description: `unknown scope ${bad.join(' ')}` });
    }
    const value = crypto.randomBytes(24).toString('base64url');
    const lifetime = this.options.tokenLifetimeSec;
    this.tokens.set(value, { expiresAt: this.now() + lifetime * 1000, revoked: false });
    this.counters.tokensIssued++;
    // Forget long-expired tokens so a months-long demo does not grow.
    if (this.tokens.size > 1000) for (const [k, t] of this.tokens) if (t.expiresAt < this.now()) this.tokens.delete(k);
    const body: Record<string, unknown> = { access_token: value, token_type: 'Bearer', scope: scopes.join(' ') };
    if (!this.options.omitExpiresIn) body.expires_in = this.options.advertisedLifetimeSec;
    json(res, 200, body, { 'Cache-Control': 'no-store' });
  }

  /** The client's id and secret, read the way the configured client authentication sends them. */
  private clientOf(rec: RecordedRequest): { id: string; secret: string } | { refused: string } {
    if (this.options.authMethod === 'client_secret_post') {
      const form = new URLSearchParams(rec.body);
      if (rec.headers.authorization) return { refused: 'this server takes client_id and client_secret in the form body (client_secret_post), not an Authorization header' };
      return { id: form.get('client_id') ?? '', secret: form.get('client_secret') ?? '' };
    }
    const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(rec.headers.authorization ?? '');
    if (!m) return { refused: 'Basic client credentials required' };
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    let id = colon >= 0 ? decoded.slice(0, colon) : decoded;
    let secret = colon >= 0 ? decoded.slice(colon + 1) : '';
    if (this.options.authMethod === 'basic-form-encoded') {
      // RFC 6749 §2.3.1: each part was form-urlencoded; a raw "+" or "%" decodes to something else.
      const formDecode = (v: string) => {
        try {
          return decodeURIComponent(v.replace(/\+/g, ' '));
        } catch {
          return '\u0000';
        }
      };
      id = formDecode(id);
      secret = formDecode(secret);
    }
    return { id, secret };
  }

  private authorise(rec: RecordedRequest): string | null {
    const bearer = bearerOf(rec);
    if (!bearer) return 'missing bearer token';
    const t = this.tokens.get(bearer);
    if (!t) return 'unknown token';
    if (t.revoked) return 'token revoked';
    if (this.now() >= t.expiresAt) return 'token expired';
    return null;
  }

  // ---------------------------------------------------------------- service (spec §4.1, §4.2)

  /** res null: process only (a fault answers instead). */
  private command(rec: RecordedRequest, res: Reply | null): void {
    const reply = (status: number, body: unknown) => {
      if (res) json(res, status, body);
    };
    if (!/^application\/json/.test(rec.headers['content-type'] ?? '')) return reply(415, { error: 'unsupported_media_type', message: 'Content-Type must be application/json' });
    let cmd: Record<string, unknown>;
    try {
      cmd = JSON.parse(rec.body) as Record<string, unknown>;
    } catch {
      return reply(400, { error: 'invalid_request', message: 'body is not JSON' });
    }
    if (!cmd || typeof cmd !== 'object' || Array.isArray(cmd)) return reply(400, { error: 'invalid_request', message: 'body must be an object' });
    for (const f of ['action', 'locationId', 'evseId', 'token']) {
      if (typeof cmd[f] !== 'string' || cmd[f] === '') return reply(400, { error: 'invalid_request', message: `${f} must be a non-empty string` });
    }
    const { action, locationId, evseId, token } = cmd as Record<string, string>;
    this.expireSessions();
    if (action === 'START') {
      this.counters.starts++;
      if ('transactionId' in cmd) return reply(400, { error: 'invalid_request', message: 'transactionId must not be sent with START' });
      const existing = this.sessions.get(token);
      if (existing) {
        this.counters.duplicateStarts++;
        return reply(409, { error: 'conflict', message: `a session is already active for token ${token}` });
      }
      for (const s of this.sessions.values()) {
        if (s.locationId === locationId && s.evseId === evseId) return reply(409, { error: 'conflict', message: `connector ${evseId} at ${locationId} is busy` });
      }
      const now = this.now();
      this.meterSeed += 1_000;
      this.sessions.set(token, {
        locationId,
        evseId,
        token,
        locationUid: uuidFrom(locationId),
        createdAt: now,
        startedAt: now + this.options.startDelayMs,
        transactionId: `TX-${crypto.randomBytes(6).toString('hex').toUpperCase()}`,
        cdrId: crypto.randomUUID(),
        meterStart: this.meterSeed,
        powerW: this.options.powerW,
        stoppedAt: null,
      });
      return this.accepted(res, 'START');
    }
    if (action === 'STOP') {
      this.counters.stops++;
      if (typeof cmd.transactionId !== 'string' || cmd.transactionId === '') return reply(400, { error: 'invalid_request', message: 'transactionId is required with STOP' });
      const s = this.sessions.get(token);
      if (!s) return reply(404, { error: 'not_found', message: `no active session for token ${token}` });
      if (s.locationId !== locationId || s.evseId !== evseId) return reply(400, { error: 'invalid_request', message: 'locationId and evseId do not match the session' });
      if (this.now() < s.startedAt) return reply(409, { error: 'conflict', message: 'the session has not started yet' });
      if (s.transactionId !== cmd.transactionId) return reply(400, { error: 'invalid_request', message: `transactionId ${String(cmd.transactionId)} does not match the session` });
      if (s.stoppedAt !== null) {
        this.counters.duplicateStops++;
        return reply(409, { error: 'conflict', message: 'the session is already stopping' });
      }
      // ignore-stop: the station drops the STOP after the service accepted it; only STOPs that would end the session use it up.
      if (this.takeFault('post', 'ignore-stop')) return this.accepted(res, 'STOP');
      s.stoppedAt = this.now();
      return this.accepted(res, 'STOP');
    }
    reply(400, { error: 'invalid_request', message: `action must be START or STOP, not ${action}` });
  }

  private accepted(res: Reply | null, action: string): void {
    if (!res) return;
    if (this.options.acceptBody === 'json') return json(res, 202, { status: 'ACCEPTED', action });
    res.writeHead(202);
    res.end();
  }

  private progress(rec: RecordedRequest, res: Reply): void {
    this.counters.progressQueries++;
    const token = rec.query.token;
    if (!token) return json(res, 400, { error: 'invalid_request', message: 'query parameter token is required' });
    this.expireSessions();
    const s = this.sessions.get(token);
    if (!s) {
      if (this.options.noSession === '204') {
        res.writeHead(204);
        return void res.end();
      }
      if (this.options.noSession === 'empty200') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        return void res.end('');
      }
      return json(res, 404, { error: 'not_found', message: `no session for token ${token}` });
    }
    json(res, 200, this.recordOf(s));
  }

  private recordOf(s: Session): Record<string, unknown> {
    const now = this.now();
    const record: Record<string, unknown> = {
      eventType: 'Updated',
      timestamp: new Date(now).toISOString().replace(/Z$/, ''), // spec §2.2: no zone designator
      createdAt: new Date(s.createdAt).toISOString(),
      evseId: /^\d+$/.test(s.evseId) ? Number(s.evseId) : s.evseId, // spec §2.2: a number in the record
      connectorId: null,
      tokenId: s.token,
      locationId: s.locationId,
      locationUid: s.locationUid,
    };
    if (now >= s.startedAt) {
      const until = s.stoppedAt ?? now;
      const wh = Math.max(0, Math.floor(((until - s.startedAt) / 3_600_000) * s.powerW));
      record.transactionData = { transactionId: s.transactionId, cdrId: s.cdrId, meterStart: s.meterStart, meterEnd: s.meterStart + wh };
    }
    return record;
  }

  private expireSessions(): void {
    const now = this.now();
    for (const [k, s] of this.sessions) if (s.stoppedAt !== null && now >= s.stoppedAt + this.options.stopDelayMs) this.sessions.delete(k);
  }
}

/** What the service's handlers write to: a real response, or a capture to be corrupted by a fault. */
interface Reply {
  writeHead(status: number, headers?: Record<string, string>): unknown;
  end(body?: string): unknown;
}

class CapturedAnswer implements Reply {
  status = 200;
  headers: Record<string, string> = {};
  body = '';
  writeHead(status: number, headers: Record<string, string> = {}): this {
    this.status = status;
    this.headers = headers;
    return this;
  }
  end(body = ''): this {
    this.body = body;
    return this;
  }
}

const NGINX_404 = '<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

function emptyCounters(): SimulatorCounters {
  return { tokenRequests: 0, tokensIssued: 0, starts: 0, stops: 0, progressQueries: 0, duplicateStarts: 0, duplicateStops: 0, unauthorized: 0, faultsApplied: 0, connections: 0, peakConcurrent: 0, startArrivals: 0, stopArrivals: 0, duplicateStartArrivals: 0, duplicateStopArrivals: 0 };
}

function json(res: Reply, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

function bearerOf(rec: RecordedRequest): string | null {
  const m = /^Bearer (\S+)$/.exec(rec.headers.authorization ?? '');
  return m ? m[1] : null;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

function uuidFrom(text: string): string {
  const h = crypto.createHash('sha1').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
