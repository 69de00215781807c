/**
 * The client of the Charging Session Remote-Control Service: one instance per
 * config node, shared by every node that uses it. A small facade over the
 * request pipeline (transport, deadlines, token endpoint and cache, limiter,
 * retry loop, classification). Knows HTTP and tokens; knows nothing of Node-RED.
 */
import type https from 'node:https';
import { ChargingError } from '../errors';
import { trimTrailingSlashes } from '../settings';
import type { ChargingCommand } from '../session/commands';
import { type ActionResult, commandAnswer, type ProgressResult, PROGRESS_QUERY, progressAnswer, readCommandResult, readProgress, type AnswerContext } from './answers';
import { type ConnectionReport, testConnection } from './connection-test';
import { safeHost } from './safe-host';
import { ConcurrencyLimiter } from './concurrency-limiter';
import { Waits } from './deadlines';
import { Redactor } from './redactor';
import { DEFAULT_RETRY, type Request, RequestRunner, RetryPolicy } from './request';
import type { FleetHooks, TokenIdentity } from './fleet-hooks';
import { TokenCache, TokenCacheOptions } from './token-cache';
import { AUTH_METHODS, AuthMethod, basicCredentials, TokenEndpoint, tokenEndpoint } from './token-endpoint';
import { Destination, Transport } from './transport';
import { BudgetPriority, RequestBudget } from './request-budget';
import { NO_CLIENT_METRICS, type ClientMetrics } from '../metrics/observers';

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
  /** told requests, retries, 429s, budget waits and tokens (nodes/lib/metrics); absent: nobody */
  metrics?: ClientMetrics;
}

export interface RequestOptions {
  /** aborts waiting, retries and (for a progress query) the request itself: a node's close */
  signal?: AbortSignal;
  /** a watch node's poll waits behind commands and queries in the request budget */
  priority?: BudgetPriority;
}

/** A command's options: its fence too (Request.mayProceed), asked right before each attempt goes on the wire. */
export type SendOptions = RequestOptions & Pick<Request, 'mayProceed'>;

export const DEFAULT_MAX_IN_FLIGHT = 32;
export const DEFAULT_API_KEY_HEADER = 'x-api-key';
export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** How long a closing node or configuration lets a request on the wire finish: well inside Node-RED's 15 s. */
export const CLOSE_GRACE_MS = 5_000;
export const SESSIONS_PATH = '/poi/v1/charging-sessions';

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
  private readonly answers: AnswerContext;
  private readonly policy: RetryPolicy;
  private readonly recentTokens: string[] = [];
  private readonly extraHeaders: Record<string, string> | undefined;
  /** the configured client authentication at the token endpoint (default basic, the spec's rule) */
  private readonly authMethod: AuthMethod;
  private readonly metrics: ClientMetrics;
  private closed = false;

  constructor(private readonly options: ServiceClientOptions) {
    this.tokenUrl = tokenEndpoint(options.authUrl);
    this.sessionsUrl = sessionsEndpoint(options.baseUrl);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.policy = { ...DEFAULT_RETRY, ...(options.retry ?? {}) };
    this.authMethod = options.authMethod ?? 'basic';
    this.metrics = options.metrics ?? NO_CLIENT_METRICS;
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
    this.answers = { redactor: this.redactor, where: safeHost(this.sessionsUrl), timeoutMs: this.timeoutMs, maxBodyBytes: this.maxBodyBytes };
    this.limiter = new ConcurrencyLimiter(maxInFlight);
    this.budget = new RequestBudget(options.maxRequestsPerSec ?? 0, options.now);
    this.tokenEndpoint = this.endpoint(this.authMethod);
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
      metrics: this.metrics,
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
      where: this.answers.where,
      extraHeaders: this.extraHeaders,
      isClosed: () => this.closed,
      metrics: this.metrics,
    });
  }

  /**
   * GET progress by RFID token (spec §4.2). 404, 204 and an empty body mean "no session": record null.
   * A watch poll with replicas is fenced too: a lease lost while it waited for the budget sends nothing.
   */
  getProgress(token: string, opts: SendOptions = {}): Promise<ProgressResult> {
    let url: string;
    try {
      url = `${this.sessionsUrl}?token=${encodeQueryValue(token, 'token')}`;
    } catch (err) {
      return Promise.reject(err as Error);
    }
    // A promise step, not an async function: a watch node polls through here, and each async frame is paid on every poll.
    return this.runner.run({ method: 'GET', kind: 'progress', what: PROGRESS_QUERY, url, accept: progressAnswer, signal: opts.signal, priority: opts.priority, mayProceed: opts.mayProceed }).then((res) => readProgress(res, this.answers));
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
      kind: cmd.action === 'START' ? 'start' : 'stop',
      what: cmd.action,
      url: this.sessionsUrl,
      data: JSON.stringify(cmd),
      accept: commandAnswer,
      signal: opts.signal,
      mayProceed: opts.mayProceed,
    });
    return readCommandResult(res, cmd.action, this.answers);
  }

  /** The config dialog's "Test connection" (connection-test.ts): skipProbe says why the service is not probed. */
  testConnection(opts: { skipProbe?: string } = {}): Promise<ConnectionReport> {
    const configured = this.authMethod;
    return testConnection(
      {
        tokenEndpoint: (method) => (method === configured ? this.tokenEndpoint : this.endpoint(method)),
        authMethod: configured,
        service: this.service,
        sessionsUrl: this.sessionsUrl,
        sessionsPath: SESSIONS_PATH,
        where: this.answers.where,
        extraHeaders: this.extraHeaders,
        waits: this.waits,
        redactor: this.redactor,
        timeoutMs: this.timeoutMs,
      },
      opts,
    );
  }

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

  /**
   * Stop accepting work. Waiting work is refused at once; requests on the wire get
   * up to graceMs (a START or STOP half-sent is better finished than cut), then
   * are cut and the sockets freed.
   */
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
      this.metrics,
    );
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

function unpaired(field: string): ChargingError {
  return new ChargingError('INVALID_INPUT', `${field} contains an unpaired UTF-16 surrogate, which cannot be sent`, { field });
}

function encodeQueryValue(value: string, field: string): string {
  if (!value.isWellFormed()) throw unpaired(field);
  return encodeURIComponent(value);
}

