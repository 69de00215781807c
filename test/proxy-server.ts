/** A minimal forward proxy for tests: absolute-URI requests for http, CONNECT tunnels for https. Loopback only. */
import http from 'node:http';
import net from 'node:net';

export class TestProxy {
  readonly seen: string[] = [];
  private server: http.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      this.seen.push(`${req.method} ${req.url}`);
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

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
