/** A minimal forward proxy for tests: absolute-URI requests for http, CONNECT tunnels for https. Loopback only. */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface TestProxyOptions {
  /** the Proxy-Authorization value required; without it the proxy answers 407 with a page listing the request's headers, as debug proxies do */
  requireAuth?: string;
  /** answer every CONNECT with this status instead of opening the tunnel (502: the proxy cannot reach the host); 0: close without answering */
  connectStatus?: number;
  /**
   * How a CONNECT is answered: 'silent' accepts it and never answers (the connection stays open),
   * 'reset' reads it and resets the connection, 'lf' opens the tunnel with an answer whose lines end in a bare LF.
   */
  connectMode?: 'normal' | 'silent' | 'reset' | 'lf';
  /** as Squid's default (`http_access deny CONNECT !SSL_ports`): a CONNECT to any port but 443 gets 403 */
  connectOnlyTo443?: boolean;
  /** serve the proxy itself over TLS (an https:// proxy) */
  tls?: { key: string | Buffer; cert: string | Buffer };
}

export class TestProxy {
  readonly seen: string[] = [];
  /** connections clients opened to the proxy, in all */
  connections = 0;
  constructor(private readonly opts: TestProxyOptions = {}) {}

  /** How CONNECTs are answered from now on (see TestProxyOptions). */
  set connectMode(mode: TestProxyOptions['connectMode']) {
    this.opts.connectMode = mode;
  }

  /** Ends every connection open now (tunnels included): the next request needs a new CONNECT. */
  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }
  private server: http.Server | https.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  async start(): Promise<this> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.seen.push(`${req.method} ${req.url}`);
      if (this.refused(req.headers)) {
        res.writeHead(407, { 'content-type': 'text/plain', 'proxy-authenticate': 'Basic realm="corp"' });
        res.end(this.page(req));
        return;
      }
      const target = new URL(req.url ?? '');
      // The proxy's credentials are for the proxy: a proxy does not pass them on.
      const { 'proxy-authorization': _own, ...headers } = req.headers;
      const upstream = http.request(
        { host: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      req.pipe(upstream);
    };
    const server = this.opts.tls ? https.createServer(this.opts.tls, handler) : http.createServer(handler);
    server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
      this.seen.push(`CONNECT ${req.url}`);
      const squidRefuses = this.opts.connectOnlyTo443 && !String(req.url).endsWith(':443');
      const status = this.refused(req.headers) ? 407 : squidRefuses ? 403 : this.opts.connectStatus;
      client.on('error', () => undefined);
      // Half-closed by the client: close our side too, as a proxy does (Node's http server allows half-open sockets).
      client.on('end', () => client.end());
      if (this.opts.connectMode === 'silent') return;
      if (this.opts.connectMode === 'reset') return void client.resetAndDestroy();
      if (status === 0) {
        client.destroy();
        return;
      }
      if (status) {
        const body = this.page(req);
        client.end(`HTTP/1.1 ${status} Refused\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
        return;
      }
      const [host, port] = String(req.url).split(':');
      let up = false;
      const upstream = net.connect(Number(port), host, () => {
        up = true;
        client.write(this.opts.connectMode === 'lf' ? 'HTTP/1.1 200 Connection Established\n\n' : 'HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      this.sockets.add(upstream);
      upstream.on('close', () => this.sockets.delete(upstream));
      // As a real proxy does when it cannot reach the host (DNS, refused): 502, then close.
      upstream.on('error', () => (!up ? client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n') : client.destroy()));
      client.on('error', () => upstream.destroy());
    });
    server.on(this.opts.tls ? 'secureConnection' : 'connection', (s: net.Socket) => {
      this.connections++;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
    return this;
  }

  private refused(headers: http.IncomingHttpHeaders): boolean {
    return this.opts.requireAuth !== undefined && headers['proxy-authorization'] !== this.opts.requireAuth;
  }

  /** An error page that echoes the request line and every header, credentials included. */
  private page(req: http.IncomingMessage): string {
    const lines = [`${req.method} ${req.url}`];
    // The credentials first, so that they fall inside the part of the page an error message keeps.
    const auth = req.headers['proxy-authorization'];
    if (auth) lines.push(`proxy-authorization: ${auth}`);
    for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i].toLowerCase() !== 'proxy-authorization') lines.push(`${req.rawHeaders[i].toLowerCase()}: ${req.rawHeaders[i + 1]}`);
    return `Proxy Authentication Required\n${lines.join('\n')}\n`;
  }

  get url(): string {
    return `${this.opts.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Connections from clients still open at the proxy. */
  openClientConnections(): Promise<number> {
    return new Promise((resolve, reject) => (this.server ? this.server.getConnections((err, n) => (err ? reject(err) : resolve(n))) : resolve(0)));
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
