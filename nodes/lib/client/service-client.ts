/**
 * The client of the Charging Session Remote-Control Service: one instance per
 * config node, shared by every node that uses it. A small facade over the
 * request pipeline (transport, deadlines, token endpoint and cache, limiter,
 * retry loop, classification). Knows HTTP and tokens; knows nothing of Node-RED.
 */
import crypto from 'node:crypto';
import type https from 'node:https';
import { ChargingError } from '../errors';
import { trimTrailingSlashes } from '../settings';
import type { ChargingCommand } from '../session/commands';
import type { ProgressRecord } from '../session/record';
import { bodyProblemText, transportReason } from './classify';
import { describeBody, readJson } from './response-body';
import { safeHost } from './safe-host';
import { gatewayRefusal, looksLikeNoSession, notFoundError } from './gateway';
import { ConcurrencyLimiter } from './concurrency-limiter';
import { Waits } from './deadlines';
import { Redactor } from './redactor';
import { DEFAULT_RETRY, type Request, RequestRunner, RetryPolicy } from './request';
import type { FleetHooks, TokenIdentity } from './fleet-hooks';
import { TokenCache, TokenCacheOptions } from './token-cache';
import { AUTH_METHODS, AuthMethod, basicCredentials, isInvalidClient, TokenEndpoint, tokenEndpoint } from './token-endpoint';
import { Destination, RawResponse, Transport, TransportError } from './transport';
import { BudgetPriority, RequestBudget } from './request-budget';

export interface ServiceClientOptions {
  baseUrl: string;
  authUrl: string;
  scope?: string;
  clientId: string;
  clientSecret: string;
  /** client authentication at the token endpoint (default: basic, the spec's rule) */
  authMethod?: AuthMethod;
  /** per HTTP exchange, headers and body included, ms (default 10 000) */
  timeoutMs?: number;
  /** requests on the wire at once for this configuration (default 16) */
  maxInFlight?: number;
  retry?: Partial<RetryPolicy>;
  /** TLS options (ca, cert, key, rejectUnauthorized) for both endpoints */
  tls?: https.AgentOptions;
  /**
   * Proxy for both endpoints: a URL, false for none, or undefined to follow the
   * standard environment variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
   */
  proxy?: string | false;
  /** Max requests per second for this configuration, token requests excluded (0 or absent: no limit) */
  maxRequestsPerSec?: number;
  /** largest response body accepted, bytes (default 1 MiB) */
  maxBodyBytes?: number;
  /** an API gateway's key, sent on every service request (never to the token endpoint) in apiKeyHeader; empty: none */
  apiKey?: string;
  /** the header for apiKey (default x-api-key) */
  apiKeyHeader?: string;
  /** extra token request parameters (see parseTokenParams) */
  tokenParams?: ReadonlyArray<readonly [string, string]>;
  tokenCache?: Omit<TokenCacheOptions, 'onWarning'>;
  /** told things a person should know that are not errors (e.g. a token lifetime raised to the floor) */
  onWarning?: (text: string) => void;
  now?: () => number;
  /** Coordinate replicas: the fleet's token and request budget (nodes/lib/fleet); absent: this process alone */
  fleet?: FleetHooks;
}

export interface RequestOptions {
  /** aborts waiting, retries and (for a progress query) the request itself: a node's close */
  signal?: AbortSignal;
  /** a watch node's poll waits behind commands and queries in the request budget */
  priority?: BudgetPriority;
}

/** A command's options: its fence too (Request.mayProceed), asked right before each attempt goes on the wire. */
export type SendOptions = RequestOptions & Pick<Request, 'mayProceed'>;

export interface ActionResult {
  statusCode: number;
  /** the 2xx body: parsed JSON, text, or null when empty or unreadable (spec §4.1: not shown) */
  body: unknown;
  /** set when the body of an accepted command could not be read: what happened to it */
  bodyNote?: string;
}

export interface ProgressResult {
  statusCode: number;
  /** the record as the service returned it, or null when there is no session */
  record: ProgressRecord | null;
}

export interface ConnectionReport {
  ok: boolean;
  /** one line for the person testing: what worked, or what to fix */
  message: string;
  /** the token's lifetime in seconds, when one was issued */
  expiresIn?: number;
  /** false when the service was not probed (the message says why) */
  probed?: boolean;
  /** another client authentication that the token endpoint accepts where the configured one was refused */
  suggestedAuthMethod?: AuthMethod;
}

export const DEFAULT_MAX_IN_FLIGHT = 32;
export const DEFAULT_API_KEY_HEADER = 'x-api-key';
export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** How long a closing node or configuration lets a request on the wire finish: well inside Node-RED's 15 s. */
export const CLOSE_GRACE_MS = 5_000;
export const SESSIONS_PATH = '/poi/v1/charging-sessions';
const PROGRESS_QUERY = 'progress query';

export function sessionsEndpoint(baseUrl: string): string {
  return trimTrailingSlashes(baseUrl.trim()) + SESSIONS_PATH;
}

/** Keep the last few tokens in the redactor: one in use, one just replaced, one spare. */
const RECENT_TOKENS = 3;

export class ServiceClient {
  private readonly redactor = new Redactor();
  private readonly waits: Waits;
  private readonly transport: Transport;
  private readonly service: Destination;
  private readonly tokenUrl: string;
  private readonly sessionsUrl: string;
  private readonly tokens: TokenCache;
  private readonly tokenEndpoint: TokenEndpoint;
  private readonly runner: RequestRunner;
  private readonly limiter: ConcurrencyLimiter;
  private readonly budget: RequestBudget;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly policy: RetryPolicy;
  private readonly recentTokens: string[] = [];
  private readonly extraHeaders: Record<string, string> | undefined;
  private closed = false;

  constructor(private readonly options: ServiceClientOptions) {
    this.tokenUrl = tokenEndpoint(options.authUrl);
    this.sessionsUrl = sessionsEndpoint(options.baseUrl);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.policy = { ...DEFAULT_RETRY, ...(options.retry ?? {}) };
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;

    this.redactor.add(options.clientSecret);
    this.redactor.add(options.apiKey);
    this.extraHeaders = options.apiKey ? { [options.apiKeyHeader || DEFAULT_API_KEY_HEADER]: options.apiKey } : undefined;
    for (const method of AUTH_METHODS) this.redactor.add(basicCredentials(options.clientId, options.clientSecret, method));

    this.waits = new Waits(options.now);
    this.transport = new Transport({ maxSockets: maxInFlight, tls: options.tls, proxy: options.proxy, maxBodyBytes: this.maxBodyBytes }, [this.tokenUrl, this.sessionsUrl],
      (pw) => this.redactor.add(pw),
      options.onWarning,
    );
    this.service = this.transport.to(this.sessionsUrl);
    this.limiter = new ConcurrencyLimiter(maxInFlight);
    this.budget = new RequestBudget(options.maxRequestsPerSec ?? 0, options.now);
    this.tokenEndpoint = this.endpoint(options.authMethod ?? 'basic');
    const fleet = options.fleet;
    const fetchToken = () => this.tokenEndpoint.requestWithRetry();
    // A token read from Redis was never seen by this replica's token endpoint: the redactor learns it here.
    const identity: TokenIdentity = {
      tokenUrl: this.tokenUrl,
      clientId: options.clientId,
      clientSecret: options.clientSecret,
      scope: (options.scope ?? '').trim(),
      tokenParams: options.tokenParams ?? [],
    };
    const fleetToken = fleet ? () => fleet.fetchToken(fetchToken, identity).then((res) => (this.remember(res.accessToken), res)) : undefined;
    this.tokens = new TokenCache(fleetToken ?? fetchToken, {
      now: options.now,
      ...options.tokenCache,
      onWarning: options.onWarning,
      ...(fleet ? { onInvalidated: (value: string) => fleet.invalidateToken(value, identity) } : {}),
    });
    this.runner = new RequestRunner({
      destination: this.service,
      tokens: this.tokens,
      limiter: this.limiter,
      budget: this.budget.enabled ? this.budget : undefined,
      shared: fleet && this.budget.enabled ? fleet.budget(this.budget.limit) : undefined,
      waits: this.waits,
      redactor: this.redactor,
      policy: this.policy,
      timeoutMs: this.timeoutMs,
      maxBodyBytes: this.maxBodyBytes,
      where: safeHost(this.sessionsUrl),
      extraHeaders: this.extraHeaders,
      isClosed: () => this.closed,
    });
  }

  /** GET progress by RFID token (spec §4.2). 404, 204 and an empty body mean "no session": record null. */
  getProgress(token: string, opts: RequestOptions = {}): Promise<ProgressResult> {
    let url: string;
    try {
      url = `${this.sessionsUrl}?token=${encodeQueryValue(token, 'token')}`;
    } catch (err) {
      return Promise.reject(err as Error);
    }
    // A promise step, not an async function: a watch node polls through here, and each async frame is paid on every poll.
    return this.runner.run({ method: 'GET', what: PROGRESS_QUERY, url, accept: progressAnswer, signal: opts.signal, priority: opts.priority }).then((res) => this.progressOf(res));
  }

  private progressOf(res: RawResponse): ProgressResult {
    if (res.status === 404) {
      const notService = notFoundError(res, { method: 'GET', what: 'Progress query' }, safeHost(this.sessionsUrl), this.redactor);
      if (notService) throw notService;
    }
    if (res.status === 404 || res.status === 204) return { statusCode: res.status, record: null };
    const body = readJson(res.text ?? '', this.redactor, PROGRESS_QUERY, res.status);
    if (body === null) return { statusCode: res.status, record: null };
    if (typeof body !== 'object' || Array.isArray(body)) {
      throw new ChargingError('BAD_RESPONSE', `Progress query: the service answered ${res.status} with a body that is not a progress record (${Array.isArray(body) ? 'an array' : typeof body})`, {
        statusCode: res.status,
      });
    }
    return { statusCode: res.status, record: body as ProgressRecord };
  }

  /**
   * POST a START or STOP command (spec §4.1). Any 2xx is accepted (the caller
   * flags one that is not 202); an accepted command whose body cannot be read
   * is still accepted, with a bodyNote: it reached the station.
   */
  async sendCommand(cmd: ChargingCommand, opts: SendOptions = {}): Promise<ActionResult> {
    for (const field of ['locationId', 'evseId', 'token', 'transactionId'] as const) {
      const v = cmd[field];
      if (typeof v === 'string' && !v.isWellFormed()) throw unpaired(field);
    }
    const res = await this.runner.run({
      method: 'POST',
      what: cmd.action,
      url: this.sessionsUrl,
      data: JSON.stringify(cmd),
      accept: success,
      signal: opts.signal,
      mayProceed: opts.mayProceed,
    });
    if (res.text === null) {
      return { statusCode: res.status, body: null, bodyNote: `The service accepted ${cmd.action} (${res.status}), but ${bodyProblemText(res, this.timeoutMs, this.maxBodyBytes)}: the command reached the station.` };
    }
    let body: unknown;
    try {
      body = readJson(res.text, this.redactor, cmd.action, res.status);
    } catch (err) {
      // Spec §4.1: the 202 body is not shown. Text that is not JSON (or JSON too deep) is passed on as a note, not as data.
      return { statusCode: res.status, body: null, bodyNote: `The service accepted ${cmd.action} (${res.status}); ${(err as Error).message.replace(/^[^:]*: /, '')}.` };
    }
    return { statusCode: res.status, body };
  }

  /**
   * The config dialog's "Test connection": a token with the values being edited
   * (and, if the configured client authentication is refused, which other one
   * the server accepts), then one progress query for a token that cannot exist,
   * to show that the base URL reaches the service and that it accepts the token.
   */
  async testConnection(opts: { skipProbe?: string } = {}): Promise<ConnectionReport> {
    const configured = this.options.authMethod ?? 'basic';
    let expiresIn: number | undefined;
    let accessToken: string;
    try {
      ({ accessToken, expiresIn } = await this.tokenEndpoint.request());
    } catch (err) {
      if (!isInvalidClient(err)) throw err;
      for (const other of AUTH_METHODS.filter((m) => m !== configured)) {
        try {
          const issued = await this.endpoint(other).request();
          return {
            ok: false,
            suggestedAuthMethod: other,
            expiresIn: issued.expiresIn,
            message: `The token endpoint refused the credentials sent as "${configured}" but accepts "${other}": switch Authentication to "${other}"?`,
          };
        } catch {
          // try the next one
        }
      }
      throw err;
    }
    const validity = `token received (valid ${expiresIn !== undefined ? `${expiresIn} s` : '30 min, assumed'})`;
    // The caller may not send this token to the base URL (see test-connection.ts): say so rather than probe.
    if (opts.skipProbe) return { ok: true, probed: false, expiresIn, message: `Token endpoint OK: ${validity}. The service was not probed: ${opts.skipProbe}` };
    const probe = await this.probeService(accessToken);
    return { ok: probe.ok, expiresIn, message: probe.ok ? `Connected: ${validity}; ${probe.message}` : `${validity[0].toUpperCase()}${validity.slice(1)}, but ${probe.message}` };
  }

  /**
   * Stop accepting work. Waiting work is refused at once; requests on the wire get
   * up to graceMs (a START or STOP half-sent is better finished than cut), then
   * are cut and the sockets freed.
   */
  /** Max requests per second (0: none), and the rate in use now (lower after a 429). */
  get requestRate(): { limit: number; current: number } {
    return { limit: this.budget.enabled ? this.budget.limit : 0, current: this.budget.currentRate };
  }

  /** A watch node's wish, in polls per second (0: it stopped watching): see RequestBudget. */
  setPollDemand(id: string, perSec: number): void {
    this.budget.setPollDemand(id, perSec);
  }

  /** By how much a watch schedule stretches so that every watch node's polls fit Max requests per second. */
  pollStretch(): number {
    return this.budget.pollStretch();
  }

  async close(graceMs = 0): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.limiter.close();
    this.budget.close();
    this.tokens.close();
    await this.waits.close(graceMs);
    this.transport.destroy();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Scrubs every known secret from text a caller built itself. */
  redact(text: string): string {
    return this.redactor.redact(text);
  }

  private endpoint(authMethod: AuthMethod): TokenEndpoint {
    return new TokenEndpoint(
      this.transport.to(this.tokenUrl),
      this.waits,
      this.redactor,
      {
        url: this.tokenUrl,
        clientId: this.options.clientId,
        clientSecret: this.options.clientSecret,
        scope: this.options.scope,
        extraParams: this.options.tokenParams,
        authMethod,
        timeoutMs: this.timeoutMs,
        attempts: this.policy.tokenAttempts,
        baseDelayMs: this.policy.baseDelayMs,
        maxDelayMs: this.policy.maxDelayMs,
        maxTotalMs: this.policy.maxTotalMs,
      },
      (t) => this.remember(t),
      () => this.closed,
    );
  }

  private async probeService(accessToken: string): Promise<{ ok: boolean; message: string }> {
    const probe = `connection-test-${crypto.randomBytes(6).toString('hex')}`;
    const where = safeHost(this.sessionsUrl);
    const ex = this.waits.exchange(this.timeoutMs);
    let res: RawResponse;
    try {
      res = await this.service.send({ method: 'GET', url: `${this.sessionsUrl}?token=${probe}`, headers: { ...this.extraHeaders, Authorization: `Bearer ${accessToken}`, Accept: 'application/json' } }, ex);
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      return { ok: false, message: `the service at ${where} could not be reached: ${transportReason(err, this.timeoutMs)}. Check the base URL.` };
    } finally {
      this.waits.finished(ex);
    }
    const text = describeBody(res.text, this.redactor);
    const said = text ? ` (${text})` : '';
    const gateway = gatewayRefusal(res, !!this.extraHeaders);
    if (gateway) return { ok: false, message: `${gateway} at ${where} refused the request (${res.status}${said}): ${this.extraHeaders ? 'check the API key and its header name' : 'it may want an API key (set API key and its header)'}; the token was not looked at` };
    if (res.status === 401 || res.status === 403) {
      return { ok: false, message: `the service at ${where} refused it (${res.status}${said}). Check the scopes, and that the token URL belongs to this service.` };
    }
    if (res.status === 404 && !looksLikeNoSession(res.text ?? '', probe)) {
      return { ok: false, message: `${where} has no ${SESSIONS_PATH} (404${said}). Check the base URL.` };
    }
    if (res.status >= 500) return { ok: true, message: `the service answers, but reported a problem (${res.status}${said})` };
    return { ok: true, message: `the service at ${where} answers (progress query: ${res.status})` };
  }

  private remember(token: string): void {
    // A token told again (by the token endpoint and the fleet both, or read from Redis after each 401) is the
    // newest, not one more: kept once, or the token in use would be pushed out of the redactor by copies of itself.
    const known = this.recentTokens.indexOf(token);
    if (known >= 0) this.recentTokens.splice(known, 1);
    else this.redactor.add(token);
    this.recentTokens.push(token);
    while (this.recentTokens.length > RECENT_TOKENS) this.redactor.remove(this.recentTokens.shift() as string);
  }
}

/** Statuses a progress query hands back rather than throws: any 2xx, and 404 (no session, or no such path: see notFoundError). */
const progressAnswer = (s: number): boolean => (s >= 200 && s < 300) || s === 404;
const success = (s: number): boolean => s >= 200 && s < 300;

function unpaired(field: string): ChargingError {
  return new ChargingError('INVALID_INPUT', `${field} contains an unpaired UTF-16 surrogate, which cannot be sent`, { field });
}

function encodeQueryValue(value: string, field: string): string {
  if (!value.isWellFormed()) throw unpaired(field);
  return encodeURIComponent(value);
}

