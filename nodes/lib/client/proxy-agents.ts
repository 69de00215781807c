/**
 * Our own connection agents: a TLS agent that marks handshake failures, and the
 * two proxy agents (absolute-URI requests for http, CONNECT tunnels for https).
 *
 * Why our own proxy agents? http-proxy-agent and https-proxy-agent moved to ESM
 * only in 8.x/9.x, which a CommonJS package cannot `require()` on every Node 20
 * that `engines` allows (require(esm) came unflagged in 20.19); 7.x is flagged
 * as outdated by the flow library's validator (D03). What we need of them fits
 * in this file: http.Agent subclasses, so that tunnels are pooled and kept alive
 * per destination (Max in flight tunnels, not one per request as axios's own
 * proxy support does: measured in test/lib/client/transport.test.ts), with our
 * TLS options (a private CA, a client certificate) applied end to end.
 *
 * Every failure before the service could have read a byte is marked on the
 * error (see connectFailure): a TLS handshake that failed, a proxy that was
 * down, refused the CONNECT (502) or wanted other credentials (407). The
 * classification then knows that nothing reached the service.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

/** What an error marked here says: a failure before anything reached the service. */
export interface EarlyFailure {
  kind: 'tls' | 'proxy';
  code: string;
  /** scheme://host:port of the proxy, for messages (never its credentials) */
  proxy?: string;
  /** the proxy's answer to CONNECT, when it answered */
  proxyStatus?: number;
}

const MARK = Symbol('charging.earlyFailure');
type Marked = Error & { code?: string; [MARK]?: EarlyFailure };

function mark(err: Marked, failure: EarlyFailure): void {
  err[MARK] ??= failure;
}

/** The mark on an error, or on the error it wraps (axios keeps the original as `cause`). */
export function connectFailure(err: unknown): EarlyFailure | undefined {
  for (let e = err as Marked | undefined, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: Marked }).cause, depth++) {
    if (e[MARK]) return e[MARK];
  }
  return undefined;
}

/** Marks every error of a TLS socket raised before its handshake completed: the request was not written yet. */
function watchHandshake(socket: tls.TLSSocket, proxy?: string): tls.TLSSocket {
  let secured = false;
  socket.once('secureConnect', () => (secured = true));
  socket.on('error', (err: Marked) => {
    if (!secured) mark(err, { kind: 'tls', code: err.code ?? 'ERR_TLS_HANDSHAKE', proxy });
  });
  return socket;
}

/** The direct https agent: Node's, with handshake failures marked. */
export class TlsAgent extends https.Agent {
  override createConnection(options: http.RequestOptions): Duplex {
    return watchHandshake(tls.connect(options as tls.ConnectionOptions));
  }
}

interface ProxyTarget {
  url: URL;
  where: string;
  /** `Basic <base64>` when the proxy URL carries credentials */
  authorization?: string;
}

function proxyTarget(proxy: string): ProxyTarget {
  const url = new URL(proxy);
  const user = decodeURIComponent(url.username);
  const authorization = user || url.password ? `Basic ${Buffer.from(`${user}:${decodeURIComponent(url.password)}`).toString('base64')}` : undefined;
  return { url, where: `${url.protocol}//${url.host}`, authorization };
}

function proxyPort(url: URL): number {
  return Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
}

/** A connection to the proxy itself; every error before it is up is the proxy's. */
function connectToProxy(target: ProxyTarget, tlsOptions: tls.ConnectionOptions): net.Socket {
  const host = target.url.hostname.replace(/^\[|\]$/g, '');
  const socket =
    target.url.protocol === 'https:' ? tls.connect({ ...tlsOptions, host, port: proxyPort(target.url), servername: net.isIP(host) ? undefined : host }) : net.connect(proxyPort(target.url), host);
  const event = target.url.protocol === 'https:' ? 'secureConnect' : 'connect';
  let up = false;
  socket.once(event, () => (up = true));
  socket.on('error', (err: Marked) => {
    if (!up) mark(err, { kind: 'proxy', code: err.code ?? 'ERR_PROXY', proxy: target.where });
  });
  return socket;
}

/** Plain http through a proxy: the request goes to the proxy with the absolute URI as its path. */
export class HttpProxyAgent extends http.Agent {
  private readonly target: ProxyTarget;

  constructor(proxy: string, options: http.AgentOptions) {
    super(options);
    this.target = proxyTarget(proxy);
  }

  /** Node's http.Agent hook (not in its type declarations), the one every proxy agent overrides. */
  addRequest(req: http.ClientRequest, options: http.RequestOptions & { host?: string; port?: number | string; hostname?: string }): void {
    const host = options.hostname ?? options.host ?? 'localhost';
    const hostPart = net.isIPv6(host) ? `[${host}]` : host;
    const port = options.port && Number(options.port) !== 80 ? `:${options.port}` : '';
    if (!/^https?:\/\//.test(req.path)) req.path = `http://${hostPart}${port}${req.path}`;
    if (this.target.authorization && !req.hasHeader('proxy-authorization')) req.setHeader('Proxy-Authorization', this.target.authorization);
    // Node's Agent types omit addRequest; it is the documented extension point of every proxy agent.
    (http.Agent.prototype as unknown as { addRequest: (r: http.ClientRequest, o: object) => void }).addRequest.call(this, req, {
      ...options,
      host: this.target.url.hostname.replace(/^\[|\]$/g, ''),
      hostname: undefined,
      port: proxyPort(this.target.url),
    });
  }

  override createConnection(): Duplex {
    return connectToProxy(this.target, {});
  }
}

/** Longest CONNECT answer head read from a proxy; more is not a proxy we can talk to. */
const MAX_CONNECT_HEAD = 16 * 1024;

/** https through a proxy: a CONNECT tunnel, then TLS with the destination over it, pooled by destination. */
export class HttpsProxyAgent extends https.Agent {
  private readonly target: ProxyTarget;

  constructor(
    proxy: string,
    options: https.AgentOptions,
    private readonly proxyTls: tls.ConnectionOptions = {},
  ) {
    super(options);
    this.target = proxyTarget(proxy);
  }

  override createConnection(requested: http.RequestOptions, done?: (err: Error | null, stream: Duplex) => void): undefined {
    const options = requested as tls.ConnectionOptions;
    const callback = done ?? (() => undefined);
    const socket = connectToProxy(this.target, this.proxyTls);
    const host = options.host ?? 'localhost';
    const authority = `${net.isIPv6(host) ? `[${host}]` : host}:${options.port ?? 443}`;
    let head = Buffer.alloc(0);
    let settled = false;
    const fail = (err: Marked) => {
      if (settled) return;
      settled = true;
      socket.removeListener('data', onData);
      socket.destroy();
      callback(err, socket);
    };
    // A proxy that closes without answering CONNECT: no 'error' event would end the wait otherwise.
    const onClose = () => fail(proxyAnswer(this.target, 0));
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_CONNECT_HEAD) fail(proxyAnswer(this.target, 0));
        return;
      }
      socket.removeListener('data', onData);
      socket.removeListener('error', fail);
      socket.removeListener('close', onClose);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      // The proxy's page (a 407 may list our headers, credentials included) is never read further.
      if (status !== 200) return fail(proxyAnswer(this.target, status));
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      settled = true;
      callback(null, watchHandshake(tls.connect({ ...options, socket, servername: options.servername ?? (net.isIP(host) ? undefined : host) }), this.target.where));
    };
    socket.on('data', onData);
    socket.once('error', fail);
    socket.once('close', onClose);
    const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
    if (this.target.authorization) lines.push(`Proxy-Authorization: ${this.target.authorization}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    return undefined;
  }
}

function proxyAnswer(target: ProxyTarget, status: number): Marked {
  const code = status === 407 ? 'ERR_PROXY_AUTH_REQUIRED' : 'ERR_PROXY_CONNECT';
  const err: Marked = Object.assign(new Error(`proxy answered CONNECT with ${status || 'no valid answer'}`), { code });
  mark(err, { kind: 'proxy', code, proxy: target.where, proxyStatus: status || undefined });
  return err;
}

export function proxyAgents(proxy: string, agentOptions: http.AgentOptions, tlsOptions: https.AgentOptions): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  return {
    httpAgent: new HttpProxyAgent(proxy, agentOptions),
    // Our TLS options apply to the destination, through the tunnel, so that a private CA is used end to end.
    httpsAgent: new HttpsProxyAgent(proxy, { ...agentOptions, ...tlsOptions }),
  };
}

/** The forms a proxy's credentials take on the wire, for the redactor: user:pass and its Basic base64. */
export function proxyCredentialForms(proxy: string): string[] {
  let t: ProxyTarget;
  try {
    t = proxyTarget(proxy);
  } catch {
    return [];
  }
  if (!t.authorization) return [];
  const user = decodeURIComponent(t.url.username);
  const password = decodeURIComponent(t.url.password);
  // The password as written in the URL too: its own percent-encoding may differ from encodeURIComponent's.
  return [password, t.url.password, `${user}:${password}`, t.authorization.slice('Basic '.length)].filter((s) => s !== '');
}
