/**
 * The token endpoint (spec §4.3, RFC 6749 §4.4): builds the client-credentials
 * request for the configured client authentication, checks the answer, and
 * retries what is worth retrying. Every error names authentication (code AUTH).
 */
import { ChargingError, closedError } from '../errors';
import { NO_CLIENT_METRICS, type RequestMetrics } from '../metrics/observers';
import { trimTrailingSlashes } from '../settings';
import { backoffDelay, parseRetryAfter } from './backoff';
import { transportReason, unreached } from './classify';
import { describeBody } from './response-body';
import { safeHost } from './safe-host';
import type { Waits } from './deadlines';
import type { Redactor } from './redactor';
import type { TokenResponse } from './token-cache';
import { Destination, RawResponse, TransportError } from './transport';

/**
 * How the client authenticates at the token endpoint.
 * - basic: HTTP Basic of the raw `clientId:clientSecret` (the spec's rule, §4.3)
 * - basic-form-encoded: RFC 6749 §2.3.1, each part form-urlencoded first
 * - client_secret_post: RFC 6749 §2.3.1, client_id and client_secret as form fields
 */
export type AuthMethod = 'basic' | 'basic-form-encoded' | 'client_secret_post';
export const AUTH_METHODS: readonly AuthMethod[] = ['basic', 'basic-form-encoded', 'client_secret_post'];

export function isAuthMethod(v: unknown): v is AuthMethod {
  return typeof v === 'string' && (AUTH_METHODS as readonly string[]).includes(v);
}

export interface TokenEndpointOptions {
  url: string;
  clientId: string;
  clientSecret: string;
  /** space-separated; left out of the request when empty */
  scope?: string;
  authMethod: AuthMethod;
  /** per request, ms, headers and body included */
  timeoutMs: number;
  /** attempts in all for one token flight, the first included */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** one flight, retries and pauses included, gives up after this long */
  maxTotalMs: number;
  /** extra form parameters (audience, resource, ...), already checked by parseTokenParams */
  extraParams?: ReadonlyArray<readonly [string, string]>;
}

/** Parameters the client sets itself: an extra parameter may not replace them. */
const RESERVED_PARAMS = new Set(['grant_type', 'client_id', 'client_secret', 'scope']);

/**
 * The "Token parameters" field: `key=value` pairs joined by `&` (values may be
 * URL-encoded), e.g. `audience=https://api.example.com` for Auth0 or
 * `resource=...` for Azure AD v1 / ADFS. Throws a CONFIG error for a malformed
 * pair or one that would set grant_type, client_id, client_secret or scope.
 */
const TOKEN_PARAMS_HINT = '(write key=value&key2=value2, URL-encoding special characters in values)';

export function parseTokenParams(text: unknown): Array<[string, string]> {
  if (text === undefined || text === null) return [];
  if (typeof text !== 'string') throw new ChargingError('CONFIG', 'Token parameters must be text such as audience=https://api.example.com');
  const trimmed = text.trim();
  if (trimmed === '') return [];
  const out: Array<[string, string]> = [];
  for (const pair of trimmed.split('&')) {
    const eq = pair.indexOf('=');
    const rawKey = eq > 0 ? pair.slice(0, eq) : '';
    if (!/^[A-Za-z0-9_.~-]+$/.test(rawKey) || /\s/.test(pair)) {
      // No part of the text is quoted: it may come from the environment.
      throw new ChargingError('CONFIG', `Token parameters: a part is not a key=value pair ${TOKEN_PARAMS_HINT}`, { field: 'tokenParams' });
    }
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).replace(/\+/g, ' '));
    } catch {
      throw new ChargingError('CONFIG', `Token parameters: a value is not valid URL-encoding ${TOKEN_PARAMS_HINT}`, { field: 'tokenParams' });
    }
    if (RESERVED_PARAMS.has(rawKey.toLowerCase())) {
      throw new ChargingError('CONFIG', `Token parameters may not set ${rawKey}: it is set from the client ID, client secret, scope and authentication fields`);
    }
    out.push([rawKey, value]);
  }
  return out;
}

/**
 * The token address. The spec gives an auth base and the endpoint below it,
 * {authUrl}/v1/token; a standard OAuth server is configured with its full token
 * endpoint (Keycloak's .../protocol/openid-connect/token, Azure AD's
 * .../oauth2/v2.0/token, Auth0's /oauth/token), so a path that already ends in
 * /token is used as typed. The suffix goes into the path, before any query: a
 * typed "?" or "#" cannot swallow it. A fragment is never sent, so it is dropped.
 */
export function tokenEndpoint(authUrl: string): string {
  let url = authUrl.trim();
  const hash = url.indexOf('#');
  if (hash >= 0) url = url.slice(0, hash);
  const q = url.indexOf('?');
  const query = q >= 0 ? url.slice(q) : '';
  const path = trimTrailingSlashes(q >= 0 ? url.slice(0, q) : url);
  return (path.endsWith('/token') ? path : `${path}/v1/token`) + query;
}

/** The value after "Basic " for a client authentication method (not used by client_secret_post). */
export function basicCredentials(clientId: string, clientSecret: string, method: AuthMethod = 'basic'): string {
  const encode = (s: string) => (method === 'basic-form-encoded' ? new URLSearchParams({ s }).toString().slice(2) : s);
  return Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`, 'utf8').toString('base64');
}

/** True when a token-endpoint error says the client credentials (or their form) were refused. */
export function isInvalidClient(err: unknown): boolean {
  if (!(err instanceof ChargingError) || err.code !== 'AUTH') return false;
  return err.statusCode === 401 || (err.statusCode === 400 && /invalid_client/.test(err.serviceMessage ?? ''));
}

export class TokenEndpoint {
  private readonly where: string;
  private readonly form: string;
  private readonly headers: Record<string, string>;

  constructor(
    private readonly destination: Destination,
    private readonly waits: Waits,
    private readonly redactor: Redactor,
    private readonly options: TokenEndpointOptions,
    /** told every token issued, so that it is redacted wherever it shows up */
    private readonly onIssued: (accessToken: string) => void,
    private readonly isClosed: () => boolean,
    /** told each flight (kind token), its retries and 429s */
    private readonly metrics: RequestMetrics = NO_CLIENT_METRICS,
  ) {
    this.where = safeHost(options.url);
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    const scope = (options.scope ?? '').trim().split(/\s+/).filter(Boolean).join(' ');
    if (scope) form.set('scope', scope);
    for (const [k, v] of options.extraParams ?? []) form.append(k, v);
    this.headers = { Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' };
    if (options.authMethod === 'client_secret_post') {
      form.set('client_id', options.clientId);
      form.set('client_secret', options.clientSecret);
    } else {
      this.headers.Authorization = `Basic ${basicCredentials(options.clientId, options.clientSecret, options.authMethod)}`;
    }
    this.form = form.toString();
  }

  /**
   * Asking for a token again is harmless (unlike a START), so a transient failure
   * (5xx, 429, network, timeout) is retried briefly inside the one shared flight,
   * after Retry-After when the server sent one; refused credentials (400/401/403)
   * are not. The TokenCache backs off after that.
   */
  async requestWithRetry(): Promise<TokenResponse> {
    const started = this.waits.now();
    try {
      const res = await this.flight(started);
      this.metrics.finished('token', null, (this.waits.now() - started) / 1000);
      return res;
    } catch (err) {
      this.metrics.finished('token', err instanceof ChargingError ? err.code : 'INTERNAL', (this.waits.now() - started) / 1000);
      throw err;
    }
  }

  private async flight(started: number): Promise<TokenResponse> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.request();
      } catch (err) {
        if (!(err instanceof ChargingError) || !err.retryable || attempt >= this.options.attempts || this.isClosed()) throw err;
        const delay = Math.max(backoffDelay(attempt, this.options.baseDelayMs, this.options.maxDelayMs), err.retryAfterMs ?? 0);
        if (this.waits.now() - started + delay > this.options.maxTotalMs) throw err;
        await this.waits.sleep(delay, () => closedError('configuration'));
        this.metrics.retried('token');
      }
    }
  }

  /** One token request (spec §4.3). */
  async request(): Promise<TokenResponse> {
    if (this.isClosed()) throw closedError('configuration');
    const ex = this.waits.exchange(this.options.timeoutMs);
    let res: RawResponse;
    try {
      res = await this.destination.send({ method: 'POST', url: this.options.url, data: this.form, headers: this.headers }, ex);
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      if (err.failure === 'closed') throw closedError('configuration');
      if (err.failure === 'tls' || err.failure === 'proxy' || unreached(err)) {
        // Nothing reached the token endpoint: this is the network's or the TLS set-up's problem, not the credentials'.
        throw new ChargingError('NETWORK', `Could not get an access token from ${this.where}: ${transportReason(err, this.options.timeoutMs)}${err.proxy && err.failure !== 'proxy' ? ` (through the proxy ${err.proxy})` : ''}`, {
          cause: err.code,
          retryable: unreached(err),
        });
      }
      throw this.fail(`could not get an access token from ${this.where}: ${transportReason(err, this.options.timeoutMs)}`, { cause: err.code, retryable: err.failure !== 'invalid' });
    } finally {
      this.waits.finished(ex);
    }
    return this.read(res);
  }

  private read(res: RawResponse): TokenResponse {
    const status = res.status;
    if (res.text === null) {
      const why = res.bodyProblem === 'deadline' ? `its body did not arrive in full within ${this.options.timeoutMs} ms` : res.bodyProblem === 'too-large' ? 'its body was larger than allowed' : 'its body was cut short';
      throw this.fail(`the token endpoint ${this.where} answered ${status}, but ${why}`, { statusCode: status, retryable: res.bodyProblem !== 'too-large' });
    }
    const text = describeBody(res.text, this.redactor);
    const said = text ? ` (${text})` : '';
    if (status === 407) {
      // Only a proxy answers 407: the request never reached the token endpoint.
      throw new ChargingError('NETWORK', `Could not get an access token from ${this.where}: the proxy refused the request: 407 Proxy Authentication Required${said}. Set the proxy's user and password in the proxy URL (http://user:password@host:port)`, {
        statusCode: 407,
        serviceMessage: text,
      });
    }
    if (status === 400 || status === 401 || status === 403) {
      const hint =
        this.options.authMethod === 'basic' && /invalid_client/.test(text ?? '')
          ? ' Check the client ID and secret; if they are right and the secret contains characters such as + % & =, the server may expect another client authentication (Authentication: "Basic, form-encoded" or "client_secret_post").'
          : ' Check the client ID, client secret and scopes.';
      throw this.fail(`the token endpoint ${this.where} answered ${status}${said}.${hint}`, { statusCode: status, serviceMessage: text });
    }
    if (status < 200 || status >= 300) {
      if (status === 429) this.metrics.throttled('token');
      throw this.fail(`the token endpoint ${this.where} answered ${status}${said}`, {
        statusCode: status,
        serviceMessage: text,
        retryable: status >= 500 || status === 429,
        retryAfterMs: parseRetryAfter(res.headers['retry-after']),
      });
    }
    let body: unknown;
    try {
      body = JSON.parse(res.text);
    } catch {
      throw this.fail(`the token endpoint ${this.where} answered ${status} with a body that is not JSON`, { statusCode: status });
    }
    const o = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const accessToken = o.access_token;
    if (typeof accessToken !== 'string' || accessToken === '') {
      throw this.fail(`the token endpoint ${this.where} answered without an access_token`, { statusCode: status });
    }
    this.onIssued(accessToken);
    if (typeof o.token_type === 'string' && o.token_type.toLowerCase() !== 'bearer') {
      throw this.fail(`the token endpoint ${this.where} issued a "${this.redactor.redact(o.token_type).slice(0, 40)}" token; only Bearer is supported`, { statusCode: status });
    }
    const exp = typeof o.expires_in === 'string' ? Number(o.expires_in) : o.expires_in;
    return { accessToken, expiresIn: typeof exp === 'number' && Number.isFinite(exp) ? exp : undefined };
  }

  private fail(what: string, details: ConstructorParameters<typeof ChargingError>[2]): ChargingError {
    return new ChargingError('AUTH', `Authentication failed: ${what}`, details);
  }
}
