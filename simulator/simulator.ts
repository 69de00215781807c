/**
 * A standalone HTTP server that behaves like the Charging Session Remote-Control
 * Service and its token endpoint (service-spec.md), with fault injection.
 * Used by the tests, the demo (`npm start`) and the soak. No Node-RED in here.
 *
 * This file is the facade that routes each request; the parts live beside it:
 * types.ts (faults, options, counters), http-server.ts (connections, keep-alive,
 * TLS), token-endpoint.ts, sessions.ts (START/STOP/progress), faults.ts,
 * arrivals.ts (every command counted at the door), reply.ts.
 */
import type http from 'node:http';
import { ArrivalBook } from './arrivals';
import { type Car, powerAt } from './cars';
import { applyFault, corrupt, FaultBook } from './faults';
import { SimulatorServer } from './http-server';
import { Occupancy } from './occupancy';
import { Plugs } from './plugs';
import { CapturedAnswer, json, type Reply } from './reply';
import { Sessions } from './sessions';
import { TokenEndpoint } from './token-endpoint';
import { ANSWER_FAULTS, emptyCounters, SESSIONS_PATH, TOKEN_PATH } from './types';
import type { FaultRule, FaultTarget, RecordedRequest, ResolvedOptions, Session, SimulatorCounters, SimulatorOptions } from './types';

export * from './types';
export { commandKey } from './arrivals';
export { type Car, energyWh, powerAt, fullAfterMs } from './cars';

export class ChargingServiceSimulator {
  readonly options: ResolvedOptions;
  readonly counters: SimulatorCounters = emptyCounters();
  readonly requests: RecordedRequest[] = [];
  private readonly now: () => number;
  private readonly initialIdleCloseMs: number | null;
  private readonly server: SimulatorServer;
  private readonly faults: FaultBook;
  private readonly tokens: TokenEndpoint;
  private readonly sessions: Sessions;
  private readonly arrived: ArrivalBook;
  private readonly occupancy: Occupancy;
  private readonly plugs: Plugs;

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
      tokenPath: opts.tokenPath ?? TOKEN_PATH,
    };
    this.now = opts.now ?? Date.now;
    this.initialIdleCloseMs = opts.idleCloseMs ?? null;
    const o = this.options;
    this.server = new SimulatorServer(
      { host: o.host, port: o.port, tls: opts.tls, keepAliveTimeoutMs: o.keepAliveTimeoutMs, idleCloseMs: this.initialIdleCloseMs },
      this.counters,
      () => this.now(),
      (rec, tooLarge, req, res) => this.handle(rec, tooLarge, req, res),
    );
    this.faults = new FaultBook(this.counters);
    this.tokens = new TokenEndpoint(o, this.counters, () => this.now());
    this.occupancy = new Occupancy(() => this.options.stopDelayMs);
    this.plugs = new Plugs(() => this.options.powerW);
    this.sessions = new Sessions(o, this.counters, this.faults, () => this.now(), this.occupancy, this.plugs);
    this.arrived = new ArrivalBook(this.counters);
  }

  async start(): Promise<this> {
    await this.server.start();
    this.options.port = this.server.port;
    return this;
  }

  async stop(): Promise<void> {
    await this.server.stop();
  }

  get url(): string {
    return this.server.url;
  }

  /** What a charging-service config node should be given. */
  get baseUrl(): string {
    return this.url;
  }

  get authUrl(): string {
    return this.options.tokenPath === TOKEN_PATH ? `${this.url}/auth` : `${this.url}${this.options.tokenPath}`;
  }

  /** Adds a fault; it applies to the next `times` matching requests (idle-close: until cleared). */
  inject(rule: FaultRule): void {
    // idle-close is a server setting, not a per-request fault: in force until clearFaults().
    if (rule.kind === 'idle-close') this.server.setIdleClose(rule.delayMs ?? 1000);
    else this.faults.add(rule);
  }

  /** idle-close from now on (ms), or back to the normal keep-alive with its hint (null), leaving the other faults armed. */
  setIdleClose(ms: number | null): void {
    this.server.setIdleClose(ms);
  }

  clearFaults(): void {
    this.faults.clear();
    this.server.setIdleClose(this.initialIdleCloseMs);
  }

  /** The faults armed and not yet used up. */
  pendingFaults(): readonly FaultRule[] {
    return this.faults.rules;
  }

  /** Revoke every token issued so far: the next service request gets 401. */
  revokeAllTokens(): void {
    this.tokens.revokeAll();
  }

  reset(): void {
    this.clearFaults();
    this.tokens.clear();
    this.sessions.byToken.clear();
    this.requests.length = 0;
    this.arrived.clear();
    this.occupancy.clear();
    this.plugs.clear();
    Object.assign(this.counters, emptyCounters());
  }

  // ------------------------------------------------- cars and the station (no commands)

  /** A car at the connector: the next session there draws its power and is full after its needWh. */
  plugIn(where: { locationId: string; evseId: string }, car: Partial<Car> = {}): Car {
    return this.plugs.plugIn(where.locationId, where.evseId, car);
  }

  /** The car leaves: its session (if any) ends at the station, and a START there brings no session until the next car. */
  unplug(where: { locationId: string; evseId: string }): void {
    this.plugs.unplug(where.locationId, where.evseId);
    for (const s of this.sessions.byToken.values()) if (s.locationId === where.locationId && s.evseId === where.evseId && s.stoppedAt === null) s.stoppedAt = this.now();
  }

  /**
   * The driver starts a session at the station with a card (not a command:
   * counted in no START counter or arrival). Throws when the token or the
   * connector already has a session. A car is plugged in first if given.
   */
  stationStart(target: { locationId: string; evseId: string; token: string }, car?: Partial<Car>): Readonly<Session> {
    this.sessions.expire();
    if (car) this.plugIn(target, car);
    if (this.sessions.byToken.has(target.token)) throw new Error(`token ${target.token} already has a session`);
    for (const s of this.sessions.byToken.values()) if (s.locationId === target.locationId && s.evseId === target.evseId) throw new Error(`connector ${target.evseId} at ${target.locationId} is busy`);
    return this.sessions.open(target.locationId, target.evseId, target.token, true);
  }

  /** The driver ends the token's session at the station (not a command); false when it has none running. */
  stationStop(token: string): boolean {
    const s = this.sessions.byToken.get(token);
    if (!s || s.stoppedAt !== null) return false;
    s.stoppedAt = this.now();
    return true;
  }

  /** What the token's session draws now, W (0: none, pending, stopped or full). */
  powerNow(token: string): number {
    const s = this.sessions.byToken.get(token);
    const now = this.now();
    if (!s || s.stoppedAt !== null || now < s.startedAt) return 0;
    return powerAt(s.car, now - s.startedAt);
  }

  /**
   * The most sessions that existed at one moment (from creation until
   * progress no longer shows them), among those `which` accepts: exact, over
   * every session since the start or the last reset.
   */
  peakSessions(which?: (s: Readonly<Session>) => boolean): number {
    return this.occupancy.peak(which);
  }

  /** Sessions of `which` that exist at `at` on the simulator's clock. */
  sessionsAt(at: number, which?: (s: Readonly<Session>) => boolean): number {
    return this.occupancy.liveAt(at, which);
  }

  /** Every session since the start or the last reset, oldest first. */
  sessionLog(): readonly Readonly<Session>[] {
    return this.occupancy.all();
  }

  /**
   * How many times a command arrived, whatever it was answered: START keyed
   * token|locationId|evseId (commandKey), STOP keyed by its transactionId.
   */
  arrivals(action: 'START' | 'STOP', key: string): number {
    return this.arrived.all(action, key);
  }

  /** How many arrivals of this command were duplicates (see SimulatorCounters.duplicateStartArrivals). */
  duplicateArrivals(action: 'START' | 'STOP', key: string): number {
    return this.arrived.duplicates(action, key);
  }

  /** What each arrival of this command was answered, in order (0: no full answer); the first 10. */
  arrivalAnswers(action: 'START' | 'STOP', key: string): readonly number[] {
    return this.arrived.answers(action, key);
  }

  /** The live session for an RFID token, if any (tests look inside). */
  session(token: string): Readonly<Session> | undefined {
    this.sessions.expire();
    return this.sessions.byToken.get(token);
  }

  activeSessions(): number {
    this.sessions.expire();
    return this.sessions.byToken.size;
  }

  // ---------------------------------------------------------------- routing

  private handle(rec: RecordedRequest, tooLarge: boolean, req: http.IncomingMessage, res: http.ServerResponse): void {
    if (rec.path.startsWith('/__sim/')) return this.control(rec, res);
    this.requests.push(rec);
    if (this.requests.length > this.options.keepRequests) this.requests.splice(0, this.requests.length - this.options.keepRequests);
    if (tooLarge) return json(res, 413, { error: 'payload_too_large', message: 'request body over 64 KiB' });
    void this.route(rec, req, res);
  }

  private async route(rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const target: FaultTarget | null =
      rec.path === this.options.tokenPath ? 'token' : rec.path === SESSIONS_PATH ? (rec.method === 'POST' ? 'post' : 'get') : null;
    if (target === 'token') this.counters.tokenRequests++;
    if (target === 'post') this.arrived.count(rec, res);
    if (target && this.faults.take(target, 'close-after-answer')) {
      // After the whole answer has reached the kernel: the next request on this pooled socket meets a closed connection.
      res.on('finish', () => req.socket.destroy());
    }
    const fault = target ? this.faults.take(target) : undefined;
    if (fault && target && ANSWER_FAULTS.has(fault.kind)) {
      // The real answer, captured, then corrupted on its way out.
      const answer = new CapturedAnswer();
      this.answer(target, rec, answer);
      return corrupt(fault, answer, rec, req, res, target);
    }
    const revoke = (bearer: string) => this.tokens.revoke(bearer);
    if (fault && !(fault.afterProcessing && target === 'post')) {
      if (await applyFault(fault, rec, req, res, revoke)) return;
    }
    if (!target) return json(res, 404, { error: 'not_found', message: `no such path ${rec.path}` });
    if (fault && fault.afterProcessing && target === 'post') {
      // The station gets the command; the answer is lost.
      this.answer(target, rec, null);
      await applyFault(fault, rec, req, res, revoke);
      return;
    }
    this.answer(target, rec, res);
  }

  /** The service's own answer to a request (res null: process only). */
  private answer(target: FaultTarget, rec: RecordedRequest, res: Reply | null): void {
    if (target === 'token') return this.tokens.handle(rec, res ?? new CapturedAnswer());
    const auth = this.tokens.authorise(rec);
    if (auth) {
      this.counters.unauthorized++;
      if (res) json(res, 401, { error: 'unauthorized', message: auth });
      return;
    }
    if (target === 'get') return this.sessions.progress(rec, res ?? new CapturedAnswer());
    return this.sessions.command(rec, res);
  }

  /** The driver at the station, for demos: {"do": "start"|"stop"|"plug"|"unplug", locationId, evseId, token, car}. */
  private station(rec: RecordedRequest, res: http.ServerResponse): void {
    try {
      const b = JSON.parse(rec.body) as { do?: string; locationId?: string; evseId?: string; token?: string; car?: Partial<Car> };
      const where = { locationId: String(b.locationId ?? ''), evseId: String(b.evseId ?? '') };
      if (b.do === 'start') this.stationStart({ ...where, token: String(b.token ?? '') }, b.car);
      else if (b.do === 'stop') this.stationStop(String(b.token ?? ''));
      else if (b.do === 'plug') this.plugIn(where, b.car ?? {});
      else if (b.do === 'unplug') this.unplug(where);
      else return json(res, 400, { error: 'do must be start, stop, plug or unplug' });
      return json(res, 200, { ok: true });
    } catch (err) {
      return json(res, 400, { error: String((err as Error).message ?? err).slice(0, 200) });
    }
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
    if (rec.path === '/__sim/station' && rec.method === 'POST') return this.station(rec, res);
    if (rec.path === '/__sim/state') {
      return json(res, 200, { counters: this.counters, activeSessions: this.activeSessions(), faults: this.faults.rules, idleCloseMs: this.server.idleClose });
    }
    json(res, 404, { error: 'not_found' });
  }
}
