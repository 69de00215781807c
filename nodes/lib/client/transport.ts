/**
 * The HTTP layer: axios with keep-alive agents, TLS options, proxies, and a
 * body limit, used exactly one way. An exchange ends in a RawResponse (headers
 * arrived, even if the body then failed) or a TransportError (no answer). Raw
 * axios errors never leave this file: they carry the request config, and with
 * it the Authorization header.
 */
import http from 'node:http';
import https from 'node:https';
import axios, { AxiosInstance, CreateAxiosDefaults } from 'axios';
import type { Exchange } from './deadlines';
import { connectFailure, proxyAgents, proxyCredentialForms, TlsAgent } from './proxy-agents';
import { proxyForUrl } from './proxy-env';

export interface TransportOptions {
  /** sockets per destination */
  maxSockets: number;
  /** TLS options (ca, cert, key, rejectUnauthorized) for every destination */
  tls?: https.AgentOptions;
  /** a proxy URL, false for none, undefined to follow HTTPS_PROXY / HTTP_PROXY / NO_PROXY */
  proxy?: string | false;
  /** largest response body accepted, bytes (after decompression) */
  maxBodyBytes: number;
}

export interface RawRequest {
  method: 'GET' | 'POST';
  url: string;
  data?: string;
  headers: Record<string, string>;
}

/** What went wrong with a body after the headers arrived. */
export type BodyProblem = 'cut' | 'too-large' | 'deadline' | 'closed';

export interface RawResponse {
  status: number;
  headers: Record<string, unknown>;
  /** the body as text; null when it could not be read in full (see bodyProblem) */
  text: string | null;
  bodyProblem: BodyProblem | null;
  /** the Content-Length the server announced, for messages about a cut body */
  announcedBytes?: number;
}

export type TransportFailure =
  | 'not-sent' // refused, DNS, unreachable: the request surely did not reach the server
  | 'tls' // the TLS handshake failed: nothing was sent
  | 'proxy' // the proxy was down, refused the tunnel or wanted credentials: nothing reached the service
  | 'invalid' // the request could not be built (e.g. a URL that cannot be encoded): nothing was sent
  | 'deadline' // no answer within the time allowed
  | 'closed' // abandoned on close
  | 'failed'; // reset or broken mid-way: it may have reached the server

export class TransportError extends Error {
  constructor(
    readonly failure: TransportFailure,
    /** the low-level code (ECONNREFUSED, DEPTH_ZERO_SELF_SIGNED_CERT, ...), never a message with request data */
    readonly code: string,
    /** scheme://host:port of the proxy involved, if any (never its credentials) */
    readonly proxy?: string,
    /** the proxy's answer to CONNECT (407, 502...) */
    readonly proxyStatus?: number,
  ) {
    super(`${failure} (${code})`);
  }
}

const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

export function isTlsCode(code: string): boolean {
  return /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|^EPROTO$/i.test(code);
}

/** A failure before anything reached the service (TLS handshake, proxy), marked by the agents in proxy-agents.ts. */
function earlyFailure(err: unknown): TransportError | undefined {
  const f = connectFailure(err);
  if (!f) return undefined;
  return new TransportError(f.kind, f.code, f.proxy, f.proxyStatus);
}

interface AxiosLikeError {
  code?: string;
  message?: string;
  request?: { res?: http.IncomingMessage };
  response?: { status: number; headers: Record<string, unknown> };
}

export class Transport {
  private readonly agents: Array<http.Agent> = [];
  private readonly byDestination = new Map<string, Destination>();

  /**
   * @param destinations every URL this transport will be asked for (the token
   * endpoint, the sessions endpoint): each gets its agents, direct or through
   * the proxy that applies to it, decided once.
   * @param onProxySecret told every form of a proxy's credentials (password, user:password, Basic value), so that they are redacted
   */
  constructor(
    private readonly options: TransportOptions,
    destinations: string[],
    onProxySecret: (secret: string) => void,
  ) {
    const keepAlive = agentOptions(options.maxSockets);
    let direct: { httpAgent: http.Agent; httpsAgent: https.Agent } | null = null;
    for (const url of destinations) {
      const proxy = options.proxy === false ? '' : (options.proxy ?? proxyForUrl(url));
      let agents: { httpAgent: http.Agent; httpsAgent: https.Agent };
      if (!proxy) {
        direct ??= {
          httpAgent: this.own(new http.Agent(keepAlive)),
          httpsAgent: this.own(new TlsAgent({ ...keepAlive, ...(options.tls ?? {}) })),
        };
        agents = direct;
      } else {
        for (const form of proxyCredentialForms(proxy)) onProxySecret(form);
        const p = proxyAgents(proxy, keepAlive, options.tls ?? {});
        agents = { httpAgent: this.own(p.httpAgent), httpsAgent: this.own(p.httpsAgent) };
      }
      this.byDestination.set(url, new Destination(this.instance(agents)));
    }
  }

  /** The way to one of the destinations given to the constructor. */
  to(url: string): Destination {
    const d = this.byDestination.get(url);
    if (!d) throw new Error(`no transport for ${url}`);
    return d;
  }

  destroy(): void {
    for (const a of this.agents) a.destroy();
  }

  private instance(agents: { httpAgent: http.Agent; httpsAgent: https.Agent }): AxiosInstance {
    return axios.create(axiosOptions(agents, this.options.maxBodyBytes));
  }

  private own<T extends http.Agent>(agent: T): T {
    this.agents.push(agent);
    return agent;
  }
}

/**
 * How the client configures axios, in one place: the benchmark builds its floor
 * (a0) from this same function, so that the floor is configured exactly as we are.
 */
export function axiosOptions(agents: { httpAgent: http.Agent; httpsAgent: https.Agent }, maxBodyBytes: number): CreateAxiosDefaults {
  return {
    ...agents,
    // Proxies come in as agents (above), decided once per destination.
    proxy: false,
    // No axios timeout: it only bounds idle time (a server dripping its body one
    // byte a second never trips it) and costs a timer per request. The client's
    // DeadlineTimer bounds the whole exchange instead.
    timeout: 0,
    // Plain http/https rather than follow-redirects: the service has no reason to
    // redirect, and a redirect must not carry the bearer token elsewhere.
    maxRedirects: 0,
    maxContentLength: maxBodyBytes,
    maxBodyLength: 64 * 1024,
    // Every status and every body is read by the client, so that a non-JSON or
    // cut-short body becomes a clear error instead of a string where an object was expected.
    validateStatus: () => true,
    responseType: 'text',
    transformResponse: [(data: unknown) => data],
  };
}

/** The keep-alive agent options for `maxSockets` sockets per destination, as the client uses them. */
export function agentOptions(maxSockets: number): http.AgentOptions {
  return { keepAlive: true, maxSockets, scheduling: 'lifo' };
}

/** The axios instance for one destination, with its agents. */
export class Destination {
  constructor(private readonly http: AxiosInstance) {}

  /**
   * One exchange. Resolves once the body is read (or failed after the headers:
   * see bodyProblem); rejects only with a TransportError.
   */
  async send(req: RawRequest, exchange: Exchange): Promise<RawResponse> {
    try {
      const res = await this.http.request<string>({ method: req.method, url: req.url, data: req.data, headers: req.headers, signal: exchange });
      return { status: res.status, headers: res.headers as Record<string, unknown>, text: res.data, bodyProblem: null };
    } catch (err) {
      return failed(err, exchange);
    }
  }
}

function failed(err: unknown, exchange: Exchange): RawResponse {
  const e = (err ?? {}) as AxiosLikeError;
  const res = e.response ?? toResponse(e.request?.res);
  if (!isAxiosError(err)) {
    // Thrown while building the request (e.g. "URI malformed"): nothing was sent.
    throw new TransportError('invalid', (err as { name?: string })?.name === 'URIError' ? 'ERR_INVALID_URL' : 'ERR_INVALID_REQUEST');
  }
  const code = e.code ?? 'UNKNOWN';
  if (res) {
    // The headers arrived; the body did not, in full.
    const problem: BodyProblem = exchange.aborted
      ? exchange.ended === 'deadline'
        ? 'deadline'
        : 'closed'
      : /maxContentLength/.test(String(e.message))
        ? 'too-large'
        : 'cut';
    const announced = Number(res.headers['content-length']);
    return { status: res.status, headers: res.headers, text: null, bodyProblem: problem, announcedBytes: Number.isFinite(announced) ? announced : undefined };
  }
  if (exchange.aborted) throw new TransportError(exchange.ended === 'deadline' ? 'deadline' : 'closed', code);
  const early = earlyFailure(err);
  if (early) throw early;
  if (NOT_SENT_CODES.has(code)) throw new TransportError('not-sent', code);
  if (isTlsCode(code)) throw new TransportError('tls', code);
  throw new TransportError('failed', code);
}

function isAxiosError(err: unknown): boolean {
  return axios.isAxiosError(err) || axios.isCancel(err);
}

function toResponse(res: http.IncomingMessage | undefined): { status: number; headers: Record<string, unknown> } | undefined {
  return res && typeof res.statusCode === 'number' ? { status: res.statusCode, headers: res.headers as Record<string, unknown> } : undefined;
}
