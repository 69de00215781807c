import http from 'node:http';
import https from 'node:https';
import axios, { AxiosError, AxiosInstance, AxiosResponse } from 'axios';
import { ChargingError, serviceText } from './errors';
import { TokenCache, TokenResponse } from './token-cache';
import { ConcurrencyLimiter, sleep, abortError } from './concurrency-limiter';
import { backoffDelay, parseRetryAfter } from './backoff';
import { Redactor } from './redactor';
import { ChargingCommand, ProgressRecord } from './session';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { getProxyForUrl } from 'proxy-from-env';

export interface RetryPolicy {
  /** attempts in all for a progress query (GET), the first included */
  getAttempts: number;
  /** attempts in all for START/STOP, counted only over failures that surely were not processed */
  postAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** a request, retries and waits included, gives up after this long */
  maxTotalMs: number;
}

export interface ServiceClientOptions {
  baseUrl: string;
  authUrl: string;
  scope?: string;
  clientId: string;
  clientSecret: string;
  /** per HTTP request, ms */
  timeoutMs?: number;
  /** requests on the wire at once for this configuration */
  maxInFlight?: number;
  retry?: Partial<RetryPolicy>;
  /** TLS options (ca, cert, key, rejectUnauthorized) for both endpoints */
  tls?: https.AgentOptions;
  /**
   * Proxy for both endpoints: a URL, false for none, or undefined to follow the
   * standard environment variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
   */
  proxy?: string | false;
  /** largest response body accepted, bytes */
  maxBodyBytes?: number;
  tokenCache?: { defaultLifetimeMs?: number; renewMarginMs?: number; failureBackoffMs?: number; maxFailureBackoffMs?: number };
}

export interface RequestOptions {
  /** aborts waiting, retries and (for GET) the request itself; a node's close */
  signal?: AbortSignal;
}

export interface ActionResult {
  statusCode: number;
  /** the 202 body: parsed JSON, text, or null when empty (spec §4.1: not shown) */
  body: unknown;
}

export interface ProgressResult {
  statusCode: number;
  /** the record as the service returned it, or null when there is no session */
  record: ProgressRecord | null;
}

export const DEFAULT_RETRY: RetryPolicy = {
  getAttempts: 4,
  postAttempts: 3,
  baseDelayMs: 250,
  maxDelayMs: 5_000,
  maxTotalMs: 30_000,
};

const SESSIONS_PATH = '/poi/v1/charging-sessions';
const TOKEN_PATH = '/v1/token';
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

interface Operation {
  method: 'GET' | 'POST';
  /** words for messages: "START", "STOP", "progress query" */
  what: string;
  params?: Record<string, string>;
  data?: unknown;
  /** statuses returned to the caller rather than thrown */
  acceptStatus: (status: number) => boolean;
  signal?: AbortSignal;
}

/** The token address: {authUrl}/v1/token, or authUrl itself if it already ends so. */
export function tokenEndpoint(authUrl: string): string {
  const trimmed = authUrl.trim().replace(/\/+$/, '');
  return trimmed.endsWith(TOKEN_PATH) ? trimmed : trimmed + TOKEN_PATH;
}

export function sessionsEndpoint(baseUrl: string): string {
  return baseUrl.trim().replace(/\/+$/, '') + SESSIONS_PATH;
}

/**
 * Talks to the service and its token endpoint. Knows HTTP, tokens and the retry
 * policy; knows nothing of Node-RED or msg. One instance per config node, shared
 * by every node that uses it.
 */
export class ServiceClient {
  readonly tokens: TokenCache;
  private readonly http: AxiosInstance;
  private readonly limiter: ConcurrencyLimiter;
  private readonly redactor = new Redactor();
  private readonly retry: RetryPolicy;
  private readonly tokenUrl: string;
  private readonly sessionsUrl: string;
  private readonly ownAgents: Array<http.Agent | https.Agent> = [];
  private readonly agentsByUrl = new Map<string, { httpAgent: http.Agent; httpsAgent: https.Agent }>();
  private readonly inFlight = new Set<AbortController>();
  private recentTokens: string[] = [];
  private closed = false;
  /** counters for status, tests, soak and benchmark */
  readonly stats = { requests: 0, retries: 0 };

  constructor(private readonly options: ServiceClientOptions) {
    this.tokenUrl = tokenEndpoint(options.authUrl);
    this.sessionsUrl = sessionsEndpoint(options.baseUrl);
    this.retry = { ...DEFAULT_RETRY, ...(options.retry ?? {}) };
    this.limiter = new ConcurrencyLimiter(options.maxInFlight ?? 8);
    this.redactor.add(options.clientSecret);
    this.redactor.add(basicCredentials(options.clientId, options.clientSecret));

    // One keep-alive pool per destination: direct, or through the proxy that applies to it.
    const maxSockets = options.maxInFlight ?? 8;
    const direct = {
      httpAgent: this.own(new http.Agent({ keepAlive: true, maxSockets, scheduling: 'lifo' })),
      httpsAgent: this.own(new https.Agent({ keepAlive: true, maxSockets, scheduling: 'lifo', ...(options.tls ?? {}) })),
    };
    for (const url of [this.tokenUrl, this.sessionsUrl]) {
      const proxy = options.proxy === false ? '' : (options.proxy ?? getProxyForUrl(url));
      if (!proxy) {
        this.agentsByUrl.set(url, direct);
        continue;
      }
      this.redactProxyCredentials(proxy);
      const agentOptions = { keepAlive: true, maxSockets, scheduling: 'lifo' as const };
      this.agentsByUrl.set(url, {
        httpAgent: this.own(new HttpProxyAgent(proxy, agentOptions)),
        httpsAgent: this.own(new TlsTunnelAgent(proxy, agentOptions, options.tls ?? {})),
      });
    }

    this.http = axios.create({
      timeout: options.timeoutMs ?? 10_000,
      // Proxies come in as agents (above); axios's own env-proxy handling is off because it
      // cannot tunnel https through an http proxy.
      proxy: false,
      maxRedirects: 0,
      maxContentLength: options.maxBodyBytes ?? 1024 * 1024,
      maxBodyLength: 64 * 1024,
      // We read every status and parse every body ourselves, so that a non-JSON or cut-short
      // body becomes a clear error instead of a string where an object was expected.
      validateStatus: () => true,
      responseType: 'text',
      transformResponse: [(data: unknown) => data],
    });

    this.tokens = new TokenCache(() => this.requestTokenWithRetry(), options.tokenCache);
  }

  /** Request a fresh token, bypassing the cache: the config dialog's "Test connection". */
  async testConnection(): Promise<{ expiresIn?: number }> {
    const res = await this.requestToken();
    return { expiresIn: res.expiresIn };
  }

  startSession(cmd: ChargingCommand, opts: RequestOptions = {}): Promise<ActionResult> {
    return this.action(cmd, opts);
  }

  stopSession(cmd: ChargingCommand, opts: RequestOptions = {}): Promise<ActionResult> {
    return this.action(cmd, opts);
  }

  /** GET progress by RFID token. 404, 204 and an empty body mean "no session": record null. */
  async getProgress(token: string, opts: RequestOptions = {}): Promise<ProgressResult> {
    const res = await this.send({
      method: 'GET',
      what: 'progress query',
      params: { token },
      acceptStatus: (s) => (s >= 200 && s < 300) || s === 404,
      signal: opts.signal,
    });
    if (res.status === 404 || res.status === 204) return { statusCode: res.status, record: null };
    const body = parseBody(res, 'progress query');
    if (body === null) return { statusCode: res.status, record: null };
    if (typeof body !== 'object' || Array.isArray(body)) {
      throw new ChargingError(
        'BAD_RESPONSE',
        `Progress query: the service answered ${res.status} with a body that is not a progress record (${describe(body)})`,
        { statusCode: res.status },
      );
    }
    return { statusCode: res.status, record: body as ProgressRecord };
  }

  /**
   * Stop accepting work. Waits up to graceMs for requests on the wire (a START or
   * STOP half-sent is better finished than cut), then aborts the rest and frees the sockets.
   */
  async close(graceMs = 0): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.limiter.close();
    this.tokens.close();
    if (graceMs > 0 && this.inFlight.size > 0) {
      const deadline = Date.now() + graceMs;
      while (this.inFlight.size > 0 && Date.now() < deadline) await sleep(20);
    }
    for (const c of this.inFlight) c.abort();
    for (const a of this.ownAgents) a.destroy();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The redactor is exposed so callers can scrub text they build themselves. */
  redact(text: string): string {
    return this.redactor.redact(text);
  }

  /** The destination through the proxy, if any: for messages and tests. */
  viaProxy(which: 'token' | 'service'): boolean {
    const agents = this.agentsByUrl.get(which === 'token' ? this.tokenUrl : this.sessionsUrl);
    return agents !== undefined && agents.httpAgent instanceof HttpProxyAgent;
  }

  private redactProxyCredentials(proxy: string): void {
    try {
      const u = new URL(proxy);
      this.redactor.add(decodeURIComponent(u.password));
      this.redactor.add(u.password);
    } catch {
      // an unreadable proxy URL fails at the first request with a network error
    }
  }

  private own<T extends http.Agent>(agent: T): T {
    this.ownAgents.push(agent);
    return agent;
  }

  private async action(cmd: ChargingCommand, opts: RequestOptions): Promise<ActionResult> {
    const res = await this.send({
      method: 'POST',
      what: cmd.action,
      data: cmd,
      acceptStatus: (s) => s === 202 || (s >= 200 && s < 300),
      signal: opts.signal,
    });
    let body: unknown = null;
    try {
      body = parseBody(res, cmd.action);
    } catch {
      // Spec §4.1: the 202 body is not shown. Text that is not JSON is passed on as text.
      body = typeof res.data === 'string' ? res.data : null;
    }
    return { statusCode: res.status, body };
  }

  /** The heart of the retry policy; see DESIGN.md §3 "401", "retries" and "429". */
  private async send(op: Operation): Promise<AxiosResponse<string>> {
    const started = Date.now();
    const idempotent = op.method === 'GET';
    const maxAttempts = idempotent ? this.retry.getAttempts : this.retry.postAttempts;
    let attempt = 0;
    let refreshedAfter401 = false;

    for (;;) {
      if (this.closed) throw closedError();
      if (op.signal?.aborted) throw abortError();
      attempt++;
      const token = await this.tokens.get();
      const release = await this.limiter.acquire(op.signal);
      const controller = new AbortController();
      // GET is cut on close at once; a START/STOP on the wire runs to its timeout so
      // that its outcome is known (close() aborts it only after its grace period).
      const onAbort = () => controller.abort();
      if (idempotent) op.signal?.addEventListener('abort', onAbort, { once: true });
      this.inFlight.add(controller);
      let res: AxiosResponse<string> | undefined;
      let failure: ChargingError | undefined;
      try {
        this.stats.requests++;
        res = await this.http.request<string>({
          ...this.agentsByUrl.get(this.sessionsUrl),
          method: op.method,
          url: this.sessionsUrl,
          params: op.params,
          data: op.data === undefined ? undefined : JSON.stringify(op.data),
          headers: {
            Authorization: `Bearer ${token.value}`,
            Accept: 'application/json',
            ...(op.data === undefined ? {} : { 'Content-Type': 'application/json; charset=utf-8' }),
          },
          signal: controller.signal,
        });
      } catch (err) {
        failure = this.networkError(err, op);
        if (controller.signal.aborted) failure = this.closed ? closedError() : abortError();
      } finally {
        this.inFlight.delete(controller);
        op.signal?.removeEventListener('abort', onAbort);
        release();
      }

      if (res) {
        if (op.acceptStatus(res.status)) return res;
        failure = this.httpError(res, op, refreshedAfter401);
        if (res.status === 401 && !refreshedAfter401) {
          // Spec §5.5: tokens expire; a 401 may mean ours was revoked or expired early.
          // One new token, one retry; the request surely was not processed.
          refreshedAfter401 = true;
          this.tokens.invalidate(token.value);
          attempt--; // the 401 retry does not count against the retry budget
          continue;
        }
      }
      if (!failure) throw new Error('unreachable');
      const elapsed = Date.now() - started;
      const canRetry = failure.retryable && attempt < maxAttempts && elapsed < this.retry.maxTotalMs;
      if (!canRetry) throw this.finalError(failure, op, attempt);
      let delay = backoffDelay(attempt, this.retry.baseDelayMs, this.retry.maxDelayMs);
      if (failure.retryAfterMs !== undefined) delay = Math.max(delay, failure.retryAfterMs);
      if (elapsed + delay > this.retry.maxTotalMs) throw this.finalError(failure, op, attempt);
      this.stats.retries++;
      await sleep(delay, op.signal);
    }
  }

  private finalError(failure: ChargingError, op: Operation, attempts: number): ChargingError {
    if (attempts <= 1 || failure.outcomeUnknown || !failure.retryable) return failure;
    return new ChargingError(failure.code, `${failure.message} (gave up after ${attempts} attempts)`, {
      statusCode: failure.statusCode,
      serviceMessage: failure.serviceMessage,
      cause: failure.causeCode,
      retryAfterMs: failure.retryAfterMs,
    });
  }

  private httpError(res: AxiosResponse<string>, op: Operation, after401Retry: boolean): ChargingError {
    const status = res.status;
    const text = this.scrub(serviceText(res.data));
    const said = text ? `: ${text}` : '';
    const idempotent = op.method === 'GET';
    if (status === 401) {
      return new ChargingError(
        'AUTH',
        after401Retry
          ? `${op.what} refused with 401 Unauthorized even with a freshly issued token${said}. Check the client's scopes and that the token URL belongs to this service.`
          : `${op.what} refused with 401 Unauthorized${said}`,
        { statusCode: 401, serviceMessage: text },
      );
    }
    if (status === 429) {
      const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
      const wait = retryAfterMs !== undefined ? ` (Retry-After ${Math.ceil(retryAfterMs / 1000)} s)` : '';
      return new ChargingError('RATE_LIMITED', `${op.what} rate-limited by the service: 429 Too Many Requests${wait}${said}`, {
        statusCode: 429,
        serviceMessage: text,
        retryable: true,
        retryAfterMs,
      });
    }
    if (status >= 500) {
      if (!idempotent) return outcomeUnknown(op, `the service answered ${status}${said}`, { statusCode: status, serviceMessage: text });
      return new ChargingError('HTTP', `${op.what} failed: the service answered ${status}${said}`, {
        statusCode: status,
        serviceMessage: text,
        retryable: true,
      });
    }
    return new ChargingError('HTTP', `${op.what} failed: the service answered ${status}${said}`, {
      statusCode: status,
      serviceMessage: text,
    });
  }

  private networkError(err: unknown, op: Operation): ChargingError {
    const e = err as AxiosError;
    const code = e?.code ?? 'UNKNOWN';
    const idempotent = op.method === 'GET';
    if (code === 'ERR_BAD_RESPONSE' || /maxContentLength/.test(String(e?.message))) {
      return new ChargingError('BAD_RESPONSE', `${op.what}: the service's answer was larger than allowed (${this.options.maxBodyBytes ?? 1048576} bytes)`, { cause: code });
    }
    const timedOut = code === 'ECONNABORTED' || code === 'ETIMEDOUT';
    const notSent = NOT_SENT_CODES.has(code);
    const tls = isTlsCode(code);
    const where = safeHost(this.sessionsUrl);
    if (tls) {
      return new ChargingError('NETWORK', `${op.what}: TLS handshake with ${where} failed (${code}). For a private CA, set it in a TLS configuration on the service node.`, { cause: code });
    }
    if (notSent) {
      return new ChargingError('NETWORK', `${op.what}: could not connect to ${where} (${code})`, { cause: code, retryable: true });
    }
    if (!idempotent) {
      return outcomeUnknown(op, timedOut ? `no answer within ${this.options.timeoutMs ?? 10000} ms` : `the connection failed (${code})`, { cause: code });
    }
    if (timedOut) {
      return new ChargingError('TIMEOUT', `${op.what}: no answer from ${where} within ${this.options.timeoutMs ?? 10000} ms`, { cause: code, retryable: true });
    }
    return new ChargingError('NETWORK', `${op.what}: the connection to ${where} failed (${code})`, { cause: code, retryable: true });
  }

  /**
   * Asking for a token again is harmless (unlike a START), so a transient failure
   * (5xx, 429, network, timeout) is retried briefly inside the one shared flight;
   * refused credentials (400/401/403) are not. The TokenCache backs off after that.
   */
  private async requestTokenWithRetry(): Promise<TokenResponse> {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.requestToken();
      } catch (err) {
        const e = err as ChargingError;
        const elapsed = Date.now() - started;
        if (!(e instanceof ChargingError) || !e.retryable || attempt >= this.retry.postAttempts || this.closed) throw err;
        const delay = backoffDelay(attempt, this.retry.baseDelayMs, this.retry.maxDelayMs);
        if (elapsed + delay > this.retry.maxTotalMs) throw err;
        this.stats.retries++;
        await sleep(delay);
      }
    }
  }

  /** Spec §4.3. Errors here always name authentication. */
  private async requestToken(): Promise<TokenResponse> {
    if (this.closed) throw closedError();
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    const scope = (this.options.scope ?? '').trim().split(/\s+/).filter(Boolean).join(' ');
    if (scope) form.set('scope', scope);
    const controller = new AbortController();
    this.inFlight.add(controller);
    let res: AxiosResponse<string>;
    const where = safeHost(this.tokenUrl);
    try {
      res = await this.http.request<string>({
        ...this.agentsByUrl.get(this.tokenUrl),
        method: 'POST',
        url: this.tokenUrl,
        data: form.toString(),
        headers: {
          Authorization: `Basic ${basicCredentials(this.options.clientId, this.options.clientSecret)}`,
          Accept: 'application/json',
          'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8',
        },
        signal: controller.signal,
      });
    } catch (err) {
      if (controller.signal.aborted) throw closedError();
      const code = (err as AxiosError)?.code ?? 'UNKNOWN';
      const reason =
        code === 'ECONNABORTED' || code === 'ETIMEDOUT'
          ? `no answer within ${this.options.timeoutMs ?? 10000} ms`
          : isTlsCode(code)
            ? `TLS handshake failed (${code}). For a private CA, set it in a TLS configuration on the service node.`
            : `connection failed (${code})`;
      throw new ChargingError('AUTH', `Authentication failed: could not get an access token from ${where}: ${reason}`, { cause: code, retryable: true });
    } finally {
      this.inFlight.delete(controller);
    }
    const text = this.scrub(serviceText(res.data));
    const said = text ? ` (${text})` : '';
    if (res.status === 400 || res.status === 401 || res.status === 403) {
      throw new ChargingError(
        'AUTH',
        `Authentication failed: the token endpoint ${where} answered ${res.status}${said}. Check the client ID, client secret and scopes.`,
        { statusCode: res.status, serviceMessage: text },
      );
    }
    if (res.status < 200 || res.status >= 300) {
      throw new ChargingError('AUTH', `Authentication failed: the token endpoint ${where} answered ${res.status}${said}`, {
        statusCode: res.status,
        serviceMessage: text,
        retryable: res.status >= 500 || res.status === 429,
      });
    }
    let body: unknown;
    try {
      body = JSON.parse(res.data);
    } catch {
      throw new ChargingError('AUTH', `Authentication failed: the token endpoint ${where} answered ${res.status} with a body that is not JSON`, {
        statusCode: res.status,
      });
    }
    const o = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const accessToken = o.access_token;
    if (typeof accessToken !== 'string' || accessToken === '') {
      throw new ChargingError('AUTH', `Authentication failed: the token endpoint ${where} answered without an access_token`, { statusCode: res.status });
    }
    if (typeof o.token_type === 'string' && o.token_type.toLowerCase() !== 'bearer') {
      throw new ChargingError('AUTH', `Authentication failed: the token endpoint ${where} issued a "${o.token_type}" token; only Bearer is supported`, { statusCode: res.status });
    }
    this.remember(accessToken);
    const exp = typeof o.expires_in === 'string' ? Number(o.expires_in) : o.expires_in;
    return { accessToken, expiresIn: typeof exp === 'number' && Number.isFinite(exp) ? exp : undefined };
  }

  /** Keep the last few tokens in the redactor: one in use, one just replaced. */
  private remember(token: string): void {
    this.redactor.add(token);
    this.recentTokens.push(token);
    while (this.recentTokens.length > 3) this.redactor.remove(this.recentTokens.shift() as string);
  }

  private scrub(text: string | undefined): string | undefined {
    return text === undefined ? undefined : this.redactor.redact(text);
  }
}

/**
 * https-proxy-agent 7 does not pass its own options to the TLS connection with
 * the destination (it resets `this.options`), so a private CA would be ignored
 * behind a proxy. This adds the TLS options to every tunnelled connection.
 */
class TlsTunnelAgent extends HttpsProxyAgent<string> {
  constructor(
    proxy: string,
    agentOptions: http.AgentOptions,
    private readonly tls: https.AgentOptions,
  ) {
    super(proxy, agentOptions);
  }

  override connect(req: http.ClientRequest, opts: Parameters<HttpsProxyAgent<string>['connect']>[1]): ReturnType<HttpsProxyAgent<string>['connect']> {
    return super.connect(req, { ...this.tls, ...opts } as typeof opts);
  }
}

export function basicCredentials(clientId: string, clientSecret: string): string {
  return Buffer.from(`${clientId}:${clientSecret}`, 'utf8').toString('base64');
}

function parseBody(res: AxiosResponse<string>, what: string): unknown {
  const text = typeof res.data === 'string' ? res.data : '';
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ChargingError('BAD_RESPONSE', `${what}: the service answered ${res.status} with a body that is not valid JSON (${text.length} bytes)`, {
      statusCode: res.status,
    });
  }
}

function outcomeUnknown(op: Operation, why: string, details: { statusCode?: number; serviceMessage?: string; cause?: string }): ChargingError {
  return new ChargingError(
    'OUTCOME_UNKNOWN',
    `${op.what} may or may not have reached the station: ${why}. It was not sent again, to avoid a duplicate ${op.what}; query the session's progress to see whether it took effect.`,
    { ...details, outcomeUnknown: true },
  );
}

function isTlsCode(code: string): boolean {
  return /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/i.test(code);
}

function closedError(): ChargingError {
  return new ChargingError('CLOSED', 'The service configuration was closed (redeploy or shutdown)');
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}

function safeHost(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'the configured URL';
  }
}
