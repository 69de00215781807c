/** A minimal forward proxy for tests: absolute-URI requests for http, CONNECT tunnels for https. Loopback only. */
import http from 'node:http';
import net from 'node:net';

export interface TestProxyOptions {
  /** the Proxy-Authorization value required; without it the proxy answers 407 with a page listing the request's headers, as debug proxies do */
  requireAuth?: string;
  /** answer every CONNECT with this status instead of opening the tunnel (502: the proxy cannot reach the host); 0: close without answering */
  connectStatus?: number;
}

export class TestProxy {
  readonly seen: string[] = [];
  constructor(private readonly opts: TestProxyOptions = {}) {}
  private server: http.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      this.seen.push(`${req.method} ${req.url}`);
      if (this.refused(req.headers)) {
        res.writeHead(407, { 'content-type': 'text/plain', 'proxy-authenticate': 'Basic realm="corp"' });
        res.end(this.page(req));
        return;
      }
      const target = new URL(req.url ?? '');
      const upstream = http.request(
        { host: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers: req.headers },
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
    });
    server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
      this.seen.push(`CONNECT ${req.url}`);
      const status = this.refused(req.headers) ? 407 : this.opts.connectStatus;
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
      const upstream = net.connect(Number(port), host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      this.sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    server.on('connection', (s: net.Socket) => {
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
    return `http://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
