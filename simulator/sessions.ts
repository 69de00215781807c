/**
 * The charging sessions behind the service (spec §4.1, §4.2): START and STOP
 * commands, progress records with a meter that advances, sessions that end.
 */
import crypto from 'node:crypto';
import { energyWh } from './cars';
import type { FaultBook } from './faults';
import type { Occupancy } from './occupancy';
import type { Plugs } from './plugs';
import { json, type Reply } from './reply';
import type { RecordedRequest, ResolvedOptions, Session, SimulatorCounters } from './types';

export class Sessions {
  readonly byToken = new Map<string, Session>();
  private meterSeed = 12_000;

  constructor(
    private readonly options: ResolvedOptions,
    private readonly counters: SimulatorCounters,
    private readonly faults: FaultBook,
    private readonly now: () => number,
    private readonly occupancy: Occupancy,
    private readonly plugs: Plugs,
  ) {}

  /** A START or STOP (spec §4.1). */
  /** res null: process only (a fault answers instead). */
  command(rec: RecordedRequest, res: Reply | null): void {
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
    this.expire();
    if (action === 'START') {
      this.counters.starts++;
      if ('transactionId' in cmd) return reply(400, { error: 'invalid_request', message: 'transactionId must not be sent with START' });
      const existing = this.byToken.get(token);
      if (existing) {
        this.counters.duplicateStarts++;
        return reply(409, { error: 'conflict', message: `a session is already active for token ${token}` });
      }
      for (const s of this.byToken.values()) {
        if (s.locationId === locationId && s.evseId === evseId) return reply(409, { error: 'conflict', message: `connector ${evseId} at ${locationId} is busy` });
      }
      // ignore-start: the service accepts the START, the station does nothing with it (the car is not plugged in);
      // only STARTs that would have started a session use it up.
      if (this.faults.take('post', 'ignore-start')) return this.accepted(res, 'START');
      // No car at the connector (it left): the station accepts START and nothing starts.
      if (this.plugs.carAt(locationId, evseId) !== null) this.open(locationId, evseId, token, false);
      return this.accepted(res, 'START');
    }
    if (action === 'STOP') {
      this.counters.stops++;
      if (typeof cmd.transactionId !== 'string' || cmd.transactionId === '') return reply(400, { error: 'invalid_request', message: 'transactionId is required with STOP' });
      const s = this.byToken.get(token);
      if (!s) return reply(404, { error: 'not_found', message: `no active session for token ${token}` });
      if (s.locationId !== locationId || s.evseId !== evseId) return reply(400, { error: 'invalid_request', message: 'locationId and evseId do not match the session' });
      if (this.now() < s.startedAt) return reply(409, { error: 'conflict', message: 'the session has not started yet' });
      if (s.transactionId !== cmd.transactionId) return reply(400, { error: 'invalid_request', message: `transactionId ${String(cmd.transactionId)} does not match the session` });
      if (s.stoppedAt !== null) {
        this.counters.duplicateStops++;
        return reply(409, { error: 'conflict', message: 'the session is already stopping' });
      }
      // ignore-stop: the station drops the STOP after the service accepted it; only STOPs that would end the session use it up.
      if (this.faults.take('post', 'ignore-stop')) return this.accepted(res, 'STOP');
      s.stoppedAt = this.now();
      return this.accepted(res, 'STOP');
    }
    reply(400, { error: 'invalid_request', message: `action must be START or STOP, not ${action}` });
  }

  /** A new session on the connector: by a START, or by the driver at the station (atStation). */
  open(locationId: string, evseId: string, token: string, atStation: boolean): Session {
    const now = this.now();
    this.meterSeed += 1_000;
    const car = this.plugs.carAt(locationId, evseId) ?? this.plugs.defaultCar();
    const session: Session = {
      locationId,
      evseId,
      token,
      locationUid: uuidFrom(locationId),
      createdAt: now,
      startedAt: now + this.options.startDelayMs,
      transactionId: `TX-${crypto.randomBytes(6).toString('hex').toUpperCase()}`,
      cdrId: crypto.randomUUID(),
      meterStart: this.meterSeed,
      powerW: car.powerW,
      car,
      atStation,
      stoppedAt: null,
    };
    this.byToken.set(token, session);
    this.occupancy.begin(session, now);
    return session;
  }

  private accepted(res: Reply | null, action: string): void {
    if (!res) return;
    if (this.options.acceptBody === 'json') return json(res, 202, { status: 'ACCEPTED', action });
    res.writeHead(202);
    res.end();
  }

  /** A progress query (spec §4.2). */
  progress(rec: RecordedRequest, res: Reply): void {
    this.counters.progressQueries++;
    const token = rec.query.token;
    if (!token) return json(res, 400, { error: 'invalid_request', message: 'query parameter token is required' });
    this.expire();
    const s = this.byToken.get(token);
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
      const wh = Math.max(0, Math.floor(energyWh(s.car, until - s.startedAt)));
      record.transactionData = { transactionId: s.transactionId, cdrId: s.cdrId, meterStart: s.meterStart, meterEnd: s.meterStart + wh };
    }
    return record;
  }

  /** Forgets sessions whose STOP took effect stopDelayMs ago. */
  expire(): void {
    const now = this.now();
    for (const [k, s] of this.byToken) if (s.stoppedAt !== null && now >= s.stoppedAt + this.options.stopDelayMs) this.byToken.delete(k);
  }
}

function uuidFrom(text: string): string {
  const h = crypto.createHash('sha1').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
