/**
 * The simulator's vocabulary: faults, options, what it records and counts.
 * Every file of simulator/ shares these; simulator.ts exports them to users.
 */
import type http from 'node:http';
import type { Car } from './cars';

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
  | 'ignore-start' // the station ignores an accepted START (car not plugged in): 202 as usual, no session appears (times: how many STARTs)
  | 'idle-close'; // server setting until cleared: idle keep-alive connections close after delayMs, with no Keep-Alive hint

/** Faults that change the real answer rather than replace or delay it. */
export const ANSWER_FAULTS: ReadonlySet<FaultKind> = new Set(['malformed', 'cut', 'truncated', 'huge', 'drip', 'deep', 'echo']);

/**
 * Faults that act beside the answer: each is looked up on its own, so an
 * "always" close-after-answer does not hide a status fault armed after it.
 */
export const SIDE_FAULTS: ReadonlySet<FaultKind> = new Set(['close-after-answer', 'ignore-stop', 'ignore-start', 'idle-close']);

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
  /**
   * Where the token endpoint listens (default /auth/v1/token, the spec's form).
   * A standard OAuth server's full endpoint, such as Keycloak's
   * /realms/x/protocol/openid-connect/token, shows a Token URL used as typed.
   */
  tokenPath?: string;
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

export interface Session {
  locationId: string;
  evseId: string;
  token: string;
  locationUid: string;
  createdAt: number;
  startedAt: number;
  transactionId: string;
  cdrId: string;
  meterStart: number;
  /** the car's most power, W (car.powerW) */
  powerW: number;
  /** what the car draws and when it is full (simulator/cars.ts) */
  car: Car;
  /** started by the driver at the station, not by a START */
  atStation: boolean;
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

export const SESSIONS_PATH = '/poi/v1/charging-sessions';
export const TOKEN_PATH = '/auth/v1/token';

export function emptyCounters(): SimulatorCounters {
  return { tokenRequests: 0, tokensIssued: 0, starts: 0, stops: 0, progressQueries: 0, duplicateStarts: 0, duplicateStops: 0, unauthorized: 0, faultsApplied: 0, connections: 0, peakConcurrent: 0, startArrivals: 0, stopArrivals: 0, duplicateStartArrivals: 0, duplicateStopArrivals: 0 };
}

/** The options with their defaults filled in (ChargingServiceSimulator.options). */
export type ResolvedOptions = Required<Omit<SimulatorOptions, 'now' | 'port' | 'host' | 'tls' | 'idleCloseMs'>> & { host: string; port: number };
