/**
 * The HTTP layer: axios with keep-alive agents, TLS options, proxies, and a
 * body limit, used exactly one way. An exchange ends in a RawResponse (headers
 * arrived, even if the body then failed) or a TransportError (no answer). Raw
 * axios errors never leave this file: they carry the request config, and with
 * it the Authorization header.
 */
import http from 'node:http';
import https from 'node:https';
import axios, { AxiosInstance, AxiosProxyConfig, AxiosRequestConfig, AxiosResponse, CreateAxiosDefaults } from 'axios';
import type { Exchange } from './deadlines';
import { abandonConnect, DirectHttpAgent, DirectHttpsAgent, forwardAgents, proxiedAgents, proxyFailure, Stage, stageOf } from './agents';
import { proxyChoice, proxySettings, type ProxySettings } from './proxy-env';
import { safeHost } from './safe-host';

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
  | 'dns' // the host name could not be resolved: nothing was sent
  | 'not-sent' // refused, unreachable: the request surely did not reach the server
  | 'tls' // the TLS handshake failed: nothing was sent
  | 'proxy' // the proxy was down, refused the tunnel or wanted credentials: nothing reached the service
  | 'invalid' // the request could not be built (e.g. a URL that cannot be encoded): nothing was sent
  | 'deadline' // no answer within the time allowed (see stage: perhaps not even a connection)
  | 'closed' // abandoned on close (see stage)
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
    /** for a deadline or close: how far the request had got when it was cut, unless it was on an open connection (it may have been read) */
    readonly stage?: Exclude<Stage, 'open'>,
    /** scheme://host:port of the destination, for messages */
    readonly where?: string,
  ) {
    super(`${failure} (${code})`);
  }

  /** The host name of the destination, for messages. */
  get host(): string {
    try {
      return new URL(this.where ?? '').hostname;
    } catch {
      return 'the host';
    }
  }
}

/**
 * TLS 1.3: the client's side of the handshake completes before the server has
 * checked the client's certificate, and the request is written at once; a server
 * that refuses the certificate answers with one of these alerts and never reads
 * the request (it is not yet the application's). A handshake failure, then.
 */
const CLIENT_CERT_REFUSED = /^ERR_SSL_TLSV1[0-9]?_ALERT_(CERTIFICATE_REQUIRED|BAD_CERTIFICATE|UNKNOWN_CA|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED|HANDSHAKE_FAILURE)$|^ERR_SSL_SSLV3_ALERT_(BAD_CERTIFICATE|HANDSHAKE_FAILURE|CERTIFICATE_UNKNOWN)$/;

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME']);

interface AxiosLikeError {
  code?: string;
  message?: string;
  request?: { res?: http.IncomingMessage };
  response?: { status: number; headers: Record<string, unknown> };
}

type Agents = { httpAgent: http.Agent; httpsAgent: https.Agent };

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
    onWarning?: (text: string) => void,
  ) {
    const keepAlive = agentOptions(options.maxSockets);
    // Commands go on a connection of their own (see Destination.send), closed after the answer.
    // maxSockets must be Infinity: with a finite one, Node's Agent sends "Connection: keep-alive" even
    // without keepAlive and hands a socket freed by one answer to a request queued on the agent (a
    // command whose slot came while a cut command's socket still counted). That socket may be closed
    // by the server already: a START on it met ECONNRESET unread and read OUTCOME_UNKNOWN (soak, seed 5;
    // 1 in 600 STARTs with hangs and closes after each answer). Max in flight bounds the sockets instead.
    const oneShot: http.AgentOptions = { ...keepAlive, keepAlive: false, maxSockets: Infinity };
    let direct: { pooled: Agents; fresh: Agents } | null = null;
    const warned = new Set<string>();
    const warnOnce = (text: string) => {
      if (!warned.has(text)) onWarning?.(text);
      warned.add(text);
    };
    for (const url of destinations) {
      const choice = options.proxy === false ? null : options.proxy ? { url: options.proxy, from: 'the proxy setting' } : proxyChoice(url, process.env, warnOnce);
      let agents: Agents;
      let fresh: Agents;
      let forward: ForwardProxy | undefined;
      if (!choice) {
        direct ??= {
          pooled: this.directAgents(keepAlive),
          fresh: this.directAgents(oneShot),
        };
        agents = direct.pooled;
        fresh = direct.fresh;
      } else {
        // Throws a CONFIG error naming the variable (never the password) for a socks:// proxy or undecodable credentials.
        const settings = proxySettings(choice.url, choice.from);
        for (const form of settings.secrets) onProxySecret(form);
        // curl's rule: http:// to the proxy as an absolute-form request, https:// through CONNECT.
        forward = new URL(url).protocol === 'http:' ? forwardProxy(settings) : undefined;
        const make = forward ? forwardAgents : proxiedAgents;
        agents = this.ownAll(make(settings, keepAlive, options.tls ?? {}));
        fresh = this.ownAll(make(settings, oneShot, options.tls ?? {}));
      }
      this.byDestination.set(url, new Destination(this.instance(agents, forward), this.instance(fresh, forward), safeHost(url), forward?.where));
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

  private instance(agents: Agents, forward?: ForwardProxy): AxiosInstance {
    return axios.create(axiosOptions(agents, this.options.maxBodyBytes, forward));
  }

  private directAgents(agentOpts: http.AgentOptions): Agents {
    return this.ownAll({ httpAgent: new DirectHttpAgent(agentOpts), httpsAgent: new DirectHttpsAgent({ ...agentOpts, ...(this.options.tls ?? {}) }) });
  }

  private ownAll(a: Agents): Agents {
    return { httpAgent: this.own(a.httpAgent), httpsAgent: this.own(a.httpsAgent) };
  }

  private own<T extends http.Agent>(agent: T): T {
    this.agents.push(agent);
    return agent;
  }
}

/** A proxy for plain http, as axios sends to one: the request line in absolute form, the credentials in our own header. */
export interface ForwardProxy {
  proxy: AxiosProxyConfig;
  authorization?: string;
  /** scheme://host:port, for messages */
  where: string;
}

function forwardProxy(settings: ProxySettings): ForwardProxy {
  return { proxy: { protocol: settings.protocol.slice(0, -1), host: settings.hostname, port: settings.port }, authorization: settings.authorization, where: settings.where };
}

/**
 * How the client configures axios, in one place: the benchmark builds its floor
 * (a0) from this same function, so that the floor is configured exactly as we are.
 */
export function axiosOptions(agents: { httpAgent: http.Agent; httpsAgent: https.Agent }, maxBodyBytes: number, forward?: ForwardProxy): CreateAxiosDefaults {
  return {
    ...agents,
    // Proxies are decided once per destination (above): a CONNECT tunnel is an agent; a
    // forward proxy for plain http is axios's own absolute-form request, with our header.
    proxy: forward?.proxy ?? false,
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
    headers: forward?.authorization ? { 'User-Agent': USER_AGENT, 'Proxy-Authorization': forward.authorization } : { 'User-Agent': USER_AGENT },
  };
}

/** The keep-alive agent options for `maxSockets` sockets per destination, as the client uses them. */
export function agentOptions(maxSockets: number): http.AgentOptions {
  // timeout: an idle pooled socket is closed after 4 s, before the 5 s idle timeout
  // that Node's and nginx's servers use by default, so that fewer requests meet a
  // socket the server has just closed. (Node's Agent also honours a server's
  // `Keep-Alive: timeout=N` hint, closing 1 s before it: tested in reused-sockets.test.ts.)
  return { keepAlive: true, maxSockets, scheduling: 'lifo', timeout: IDLE_SOCKET_MS };
}

/** How long a pooled connection may stay idle before we close it. */
export const IDLE_SOCKET_MS = 4_000;

/**
 * Who is calling, for the operator's logs: this package, axios and Node, read once.
 */
export const USER_AGENT = (() => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const own = (require('../../../../package.json') as { version: string }).version;
  const ax = (require('axios/package.json') as { version: string }).version;
  /* eslint-enable @typescript-eslint/no-require-imports */
  return `node-red-charging-session/${own} axios/${ax} node/${process.version}`;
})();

/** The axios instances for one destination: kept-alive connections, and one-shot ones. */
export class Destination {
  private readonly answer: (res: AxiosResponse<string>) => RawResponse;

  constructor(
    private readonly pooled: AxiosInstance,
    private readonly fresh: AxiosInstance,
    /** scheme://host:port, for messages */
    private readonly where: string,
    /** scheme://host:port of the proxy that plain http goes to in absolute form, if any */
    forwardProxy?: string,
  ) {
    // 407 is a proxy's status only (RFC 9110 §15.5.8): through a forward proxy it is the proxy's refusal, nothing reached the service.
    this.answer = forwardProxy
      ? (res) => {
          if (res.status === 407) throw new TransportError('proxy', 'ERR_PROXY_AUTH_REQUIRED', forwardProxy, 407, undefined, where);
          return answer(res);
        }
      : answer;
  }

  /**
   * One exchange. Resolves once the body is read (or failed after the headers:
   * see bodyProblem); rejects only with a TransportError.
   *
   * The reused-connection rule (docs/reliability.md). A server may close a
   * kept-alive connection at any time (after each answer, at its idle timeout)
   * and our next request, written to it in the same instant, then fails with a
   * reset before any answer. For a GET that costs nothing: it is sent once more,
   * at once, on a new connection. A START or STOP (or a token request) is never
   * written to a pooled connection in the first place: it always opens its own,
   * so a stale socket can never make a command fail or read "may have reached the
   * station", and no command is ever sent twice by this rule: a reset on the
   * command's own fresh connection stays what it is (the server may have read it).
   */
  send(req: RawRequest, exchange: Exchange): Promise<RawResponse> {
    const first = req.method === 'GET' ? this.pooled : this.fresh;
    // Promise steps, not an async function: one frame less on every poll of every watched token.
    return first.request<string>(this.config(req, exchange)).then(this.answer, (err: unknown) => {
      if (first === this.pooled && staleReusedSocket(err, exchange)) {
        return this.fresh.request<string>(this.config(req, exchange)).then(this.answer, (again: unknown) => failed(again, exchange, this.where));
      }
      return failed(err, exchange, this.where);
    });
  }

  private config(req: RawRequest, exchange: Exchange): AxiosRequestConfig {
    // No `data` key at all for a GET: axios merges every key of the config with its defaults, on every request.
    return req.data === undefined ? { method: req.method, url: req.url, headers: req.headers, signal: exchange } : { method: req.method, url: req.url, data: req.data, headers: req.headers, signal: exchange };
  }
}

function answer(res: AxiosResponse<string>): RawResponse {
  return { status: res.status, headers: res.headers as Record<string, unknown>, text: res.data, bodyProblem: null };
}

/**
 * Node's documented sign of a pooled socket the server had already closed: the
 * request was on a reused socket (`request.reusedSocket`) and failed with a reset
 * or a broken pipe before a single byte of an answer.
 */
function staleReusedSocket(err: unknown, exchange: Exchange): boolean {
  if (exchange.aborted || !axios.isAxiosError(err) || err.response) return false;
  const request = err.request as { reusedSocket?: boolean; res?: unknown } | undefined;
  return request?.reusedSocket === true && !request.res && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
}

/**
 * An exchange that ended without an answer, said by where it failed (agents.ts):
 * before the request could be written (DNS, TCP connect, proxy, TLS handshake)
 * nothing reached the server; after, it may have.
 */
function failed(err: unknown, exchange: Exchange, where: string): RawResponse {
  const e = (err ?? {}) as AxiosLikeError & { request?: unknown };
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
  const { stage, proxy, forward } = stageOf(e.request);
  // A CONNECT still waiting for the proxy ends with its exchange (Node's Agent would keep it until the proxy answers).
  abandonConnect(e.request);
  if (exchange.aborted) throw new TransportError(exchange.ended === 'deadline' ? 'deadline' : 'closed', code, proxy, undefined, stage === 'open' ? undefined : stage, where);
  const atProxy = proxyFailure(err);
  if (atProxy) throw new TransportError('proxy', atProxy.code, atProxy.proxy, atProxy.proxyStatus, undefined, where);
  // Through a forward proxy the only connection is the proxy's: failing to open it is the proxy failing.
  if (forward && proxy && (stage === 'lookup' || stage === 'connect' || stage === 'tls')) throw new TransportError('proxy', code, proxy, undefined, undefined, where);
  if (stage === 'open' && !CLIENT_CERT_REFUSED.test(code)) throw new TransportError('failed', code, proxy, undefined, undefined, where);
  if (stage === 'lookup' || DNS_CODES.has(code)) throw new TransportError('dns', code, proxy, undefined, undefined, where);
  if (stage === 'tls' || stage === 'open') throw new TransportError('tls', code, proxy, undefined, undefined, where);
  throw new TransportError('not-sent', code, proxy, undefined, undefined, where);
}

function isAxiosError(err: unknown): boolean {
  return axios.isAxiosError(err) || axios.isCancel(err);
}

function toResponse(res: http.IncomingMessage | undefined): { status: number; headers: Record<string, unknown> } | undefined {
  return res && typeof res.statusCode === 'number' ? { status: res.statusCode, headers: res.headers as Record<string, unknown> } : undefined;
}
