/**
 * The connection agents, well-kept ones: Node's http.Agent and https.Agent for
 * direct connections (https.Agent's session cache resumes TLS sessions), and
 * through a proxy as curl goes: https:// in hpagent's CONNECT tunnels (pooled
 * and kept alive per destination, TLS with the destination on top by
 * https.Agent itself, so that sessions are resumed there too), http:// as
 * absolute-form requests on Node's agents to the proxy (forwardAgents).
 *
 * What is ours is a thin layer that says WHERE a request stood when it failed,
 * so that classify.ts can be exact (a START that surely was not written is
 * NETWORK and may be sent again, never OUTCOME_UNKNOWN):
 * - every socket an agent opens records how far it got from its own events:
 *   'lookup' (DNS), 'connect' (TCP), 'secureConnect' (TLS handshake); what
 *   fails after that may have been written;
 * - a CONNECT still pending belongs to its request: the transport abandons it
 *   when the request's exchange ends (its deadline, a close), and destroy()
 *   ends every one (Node's Agent.destroy() knows only sockets already handed
 *   out); a failed CONNECT is marked with the proxy and its answer;
 * - the proxy's credentials are decoded once by proxy-env.ts and sent as our
 *   own Proxy-Authorization header (hpagent would decode them again, and throw
 *   on a literal %); the CONNECT gets the exchange's deadline rather than the
 *   pool's idle timeout; a CONNECT answer with bare LF line ends is read
 *   (Node's strict parser refuses it; the lenient one is used for that one
 *   answer only: the service's answers are read by the strict one).
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { HttpProxyAgent, HttpsProxyAgent } from 'hpagent';
import type { ProxySettings } from './proxy-env';

/**
 * How far a request got: 'queued' (no socket yet), 'lookup' (DNS), 'connect'
 * (TCP), 'proxy' (waiting for the proxy's tunnel), 'tls' (handshake), 'open'
 * (connected: the request is written at once, so from here it may have been read).
 */
export type Stage = 'queued' | 'lookup' | 'connect' | 'proxy' | 'tls' | 'open';

/** What a failed CONNECT says: the proxy, and its answer if it gave one. */
export interface ProxyFailure {
  code: string;
  /** scheme://host:port of the proxy (never its credentials) */
  proxy: string;
  /** the proxy's answer to CONNECT */
  proxyStatus?: number;
}

const stages = new WeakMap<object, Stage>();
const MARK = Symbol('charging.proxyFailure');
type Marked = Error & { code?: string; [MARK]?: ProxyFailure };

/** Records how far `socket` gets, from its own events. */
function watch<T extends Duplex>(socket: T, first: Stage, secure: boolean): T {
  stages.set(socket, first);
  if (first === 'lookup') {
    socket.once('lookup', (err: Error | null) => {
      if (!err && stages.get(socket) === 'lookup') stages.set(socket, 'connect');
    });
  }
  if (first === 'lookup' || first === 'connect') socket.once('connect', () => stages.set(socket, secure ? 'tls' : 'open'));
  if (secure) socket.once('secureConnect', () => stages.set(socket, 'open'));
  return socket;
}

function firstStage(options: { host?: string | null }): Stage {
  return net.isIP(String(options.host ?? '').replace(/^\[|\]$/g, '')) ? 'connect' : 'lookup';
}

/** The proxy failure marked on an error, or on the error it wraps (axios keeps the original as `cause`). */
export function proxyFailure(err: unknown): ProxyFailure | undefined {
  for (let e = err as Marked | undefined, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: Marked }).cause, depth++) {
    if (e[MARK]) return e[MARK];
  }
  return undefined;
}

interface TrackedRequest {
  agent?: unknown;
  socket?: object | null;
}

/** How far a request (axios's error.request: Node's ClientRequest) had got; its proxy, if any. */
export function stageOf(request: unknown): { stage: Stage; proxy?: string; forward?: boolean } {
  const req = request as TrackedRequest | undefined;
  if (!req) return { stage: 'queued' };
  const tunnels = req.agent ? tunnelsOf.get(req.agent) : undefined;
  const proxy = tunnels?.settings.where;
  const forward = tunnels?.forward;
  if (tunnels?.pending.has(req)) return { stage: 'proxy', proxy };
  if (!req.socket) return { stage: 'queued', proxy, forward };
  return { stage: stages.get(req.socket) ?? 'open', proxy, forward };
}

/** Ends the CONNECT a request may still be waiting for (its exchange is over). */
export function abandonConnect(request: unknown): void {
  const agent = (request as TrackedRequest | undefined)?.agent;
  if (agent) tunnelsOf.get(agent)?.abandon(request as object);
}

type CreateCallback = (err: Error | null, stream: Duplex) => void;

/** Node's http.Agent, with every socket watched. */
export class DirectHttpAgent extends http.Agent {
  override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): Duplex {
    return watch(super.createConnection(options, callback) as Duplex, firstStage(options), false);
  }
}

/** Node's https.Agent (session cache included), with every socket watched. */
export class DirectHttpsAgent extends https.Agent {
  override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): Duplex {
    return watch(super.createConnection(options, callback) as Duplex, firstStage(options), true);
  }
}

/**
 * The part the two proxied agents share (a class each, as hpagent has one per
 * scheme): pending CONNECTs by request, and the per-CONNECT options.
 */
class Tunnels {
  readonly pending = new Map<object, AbortController>();
  /** the request whose socket Node's Agent is creating now (createSocket calls createConnection synchronously) */
  creatingFor: object | null = null;
  readonly base: Record<string, unknown>;

  constructor(
    readonly settings: ProxySettings,
    proxyTls: tls.ConnectionOptions,
    /** plain http in absolute form (forwardAgents): no CONNECT, the socket goes to the proxy itself */
    readonly forward = false,
  ) {
    this.base = {
      ...(settings.protocol === 'https:' ? proxyTls : {}),
      headers: settings.authorization ? { 'proxy-authorization': settings.authorization } : {},
      insecureHTTPParser: true,
    };
  }

  /** The options of one CONNECT: its own abort, so that it ends with its request (or with destroy()). */
  open(): { stop: AbortController; req: object; options: Record<string, unknown> } {
    const stop = new AbortController();
    // Node's Agent always creates a socket for a request; a key of its own otherwise, so that destroy() still ends it.
    const req = this.creatingFor ?? {};
    this.pending.set(req, stop);
    return { stop, req, options: { ...this.base, signal: stop.signal } };
  }

  /** The CONNECT's callback, wrapped: forgets it, marks a failure, watches the socket. */
  settle(req: object, stop: AbortController, secure: boolean, callback: CreateCallback): CreateCallback {
    return (err, socket) => {
      if (this.pending.get(req) === stop) this.pending.delete(req);
      if (err) return callback(this.mark(err), socket);
      callback(null, watch(socket, secure ? 'tls' : 'open', secure));
    };
  }

  abandon(req: object): void {
    const stop = this.pending.get(req);
    this.pending.delete(req);
    stop?.abort();
  }

  destroy(): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const stop of all) stop.abort();
  }

  private mark(err: Marked): Marked {
    const status = /^Bad response: (\d{3})/.exec(err.message)?.[1];
    const proxyStatus = status ? Number(status) : undefined;
    const code = proxyStatus === 407 ? 'ERR_PROXY_AUTH_REQUIRED' : proxyStatus ? 'ERR_PROXY_CONNECT' : (err.code ?? 'ERR_PROXY_CONNECT');
    err[MARK] ??= { code, proxy: this.settings.where, proxyStatus };
    return err;
  }
}

interface HpAgent {
  proxyRequestOptions: Record<string, unknown>;
}
type AgentInternals = { createSocket(req: object, options: object, cb: CreateCallback): void };
const tunnelsOf = new WeakMap<object, Tunnels>();

// A mixin's base constructor must take `...args: any[]` (TypeScript's rule for mixins).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AgentClass = new (...args: any[]) => http.Agent;

/** One of hpagent's agents (a class per scheme), with its CONNECTs tracked by request (see Tunnels). */
function tunnelled<B extends AgentClass>(Base: B, secure: boolean) {
  return class Tunnelled extends Base {
    /** Node's Agent hook (not in its type declarations), as agent-base uses it: which request a new socket is for. */
    createSocket(req: object, options: object, cb: CreateCallback): void {
      const tunnels = tunnelsOf.get(this) as Tunnels;
      tunnels.creatingFor = req;
      try {
        (Base.prototype as unknown as AgentInternals).createSocket.call(this, req, options, cb);
      } finally {
        tunnels.creatingFor = null;
      }
    }

    override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): undefined {
      const tunnels = tunnelsOf.get(this) as Tunnels;
      const { stop, req, options: connectOptions } = tunnels.open();
      const self = this as unknown as HpAgent;
      self.proxyRequestOptions = connectOptions;
      try {
        // timeout 0: the CONNECT is bounded by its exchange (abandonConnect), not by the pool's idle timeout.
        super.createConnection({ ...options, timeout: 0 }, tunnels.settle(req, stop, secure, callback ?? (() => undefined)) as never);
      } catch (err) {
        tunnels.pending.delete(req);
        throw err;
      } finally {
        self.proxyRequestOptions = tunnels.base;
      }
      return undefined;
    }

    override destroy(): void {
      tunnelsOf.get(this)?.destroy();
      super.destroy();
    }
  };
}

const ProxiedHttpsAgent = tunnelled(HttpsProxyAgent, true);
const ProxiedHttpAgent = tunnelled(HttpProxyAgent, false);

/** The proxy as hpagent reads it, credentials left out (they go in our own header, decoded once). */
function proxyUrl(settings: ProxySettings): URL {
  const host = net.isIPv6(settings.hostname) ? `[${settings.hostname}]` : settings.hostname;
  const url = new URL(`${settings.protocol}//${host}:${settings.port}`);
  // hpagent passes url.hostname to http.request, which wants an IPv6 address without brackets.
  return net.isIPv6(settings.hostname) ? ({ protocol: url.protocol, hostname: settings.hostname, port: String(settings.port), username: '', password: '' } as unknown as URL) : url;
}

/**
 * Plain http through a proxy as curl sends it: an absolute-form request to the
 * proxy (`GET http://host/path`), never a CONNECT tunnel, which proxies often
 * allow to port 443 only (Squid's default). axios writes the request line so
 * (its `proxy` option: see transport.ts); these are Node's own agents, pooled
 * per proxy, and they tell stageOf which proxy a failed connection was to.
 */
export function forwardAgents(settings: ProxySettings, agentOptions: http.AgentOptions, tlsOptions: https.AgentOptions): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  // An https:// proxy is reached with TLS, verified with the TLS configuration's CA as for a tunnel.
  const proxyTls: tls.ConnectionOptions = tlsOptions.ca ? { ca: tlsOptions.ca } : {};
  const httpAgent = new DirectHttpAgent(agentOptions);
  const httpsAgent = new DirectHttpsAgent({ ...agentOptions, ...proxyTls });
  tunnelsOf.set(httpAgent, new Tunnels(settings, proxyTls, true));
  tunnelsOf.set(httpsAgent, new Tunnels(settings, proxyTls, true));
  return { httpAgent, httpsAgent };
}

export function proxiedAgents(settings: ProxySettings, agentOptions: http.AgentOptions, tlsOptions: https.AgentOptions): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  // The proxy connection itself gets the TLS configuration's CA (an https:// proxy behind the same private CA);
  // the client certificate and key are the service's.
  const proxyTls: tls.ConnectionOptions = tlsOptions.ca ? { ca: tlsOptions.ca } : {};
  const proxy = proxyUrl(settings);
  const httpAgent = new ProxiedHttpAgent({ ...agentOptions, proxy });
  // Our TLS options apply to the destination, through the tunnel, so that a private CA is used end to end.
  const httpsAgent = new ProxiedHttpsAgent({ ...agentOptions, ...tlsOptions, proxy }) as https.Agent;
  tunnelsOf.set(httpAgent, new Tunnels(settings, proxyTls));
  tunnelsOf.set(httpsAgent, new Tunnels(settings, proxyTls));
  return { httpAgent, httpsAgent };
}
