/**
 * A 404 to a progress query is "no session" only when it is the service's own
 * answer (empty, or the service's JSON); a gateway's or web server's 404 (HTML
 * page, Kong's "no Route matched", AWS API Gateway) is an HTTP error.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { ServiceClient } from '../../../nodes/lib/client/service-client';
import { ChargingError } from '../../../nodes/lib/errors';
import { ChargingServiceSimulator } from '../../../simulator/simulator';
import { clientFor, rejection, startSimulator } from '../../harness';

interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

const NGINX = '<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n';

describe('progress query: which 404 means "no session"', () => {
  let sim: ChargingServiceSimulator;
  let server: http.Server;
  let answer: Answer;
  let queries = 0;
  let client: ServiceClient;

  before(async () => {
    sim = await startSimulator(); // the token endpoint
    server = http.createServer((_req, res) => {
      queries++;
      res.writeHead(answer.status, answer.headers ?? {});
      res.end(answer.body ?? '');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await sim.stop();
  });
  beforeEach(() => {
    queries = 0;
    const port = (server.address() as net.AddressInfo).port;
    client = clientFor(sim, { baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2000, retry: { baseDelayMs: 10, maxDelayMs: 20 } });
  });
  afterEach(() => client.close());

  const gateway: Array<[string, Answer, RegExp]> = [
    ['an nginx HTML page', { status: 404, headers: { 'content-type': 'text/html', server: 'nginx/1.24.0' }, body: NGINX }, /answered 404 with an HTML page/],
    [
      "Kong's own JSON",
      { status: 404, headers: { 'content-type': 'application/json; charset=utf-8', 'x-kong-response-latency': '0', server: 'kong/3.6.1' }, body: '{"message":"no Route matched with those values"}' },
      /answered 404 with Kong's own answer \(no Route matched with those values\)/,
    ],
    ["Kong's JSON without its headers", { status: 404, headers: { 'content-type': 'application/json' }, body: '{"message":"no Route matched with those values"}' }, /a gateway's own JSON/],
    ['AWS API Gateway', { status: 404, headers: { 'content-type': 'application/json', 'x-amzn-errortype': 'NotFoundException' }, body: '{"message":"Not Found"}' }, /AWS API Gateway's own answer/],
    ['plain text', { status: 404, headers: { 'content-type': 'text/plain' }, body: '404 page not found\n' }, /a text that is not JSON/],
  ];
  for (const [name, a, said] of gateway) {
    it(`${name}: an HTTP error that says it is not the service's "no session", not retried`, async () => {
      answer = a;
      const err = (await rejection(client.getProgress('RFID-1'))) as ChargingError;
      assert.ok(err instanceof ChargingError, String(err));
      assert.equal(err.code, 'HTTP');
      assert.equal(err.statusCode, 404);
      assert.match(err.message, said);
      assert.match(err.message, /not the service's "no session" answer/);
      assert.equal(queries, 1);
    });
  }

  const service: Array<[string, Answer]> = [
    ["the service's own JSON", { status: 404, headers: { 'content-type': 'application/json' }, body: '{"error":"not_found","message":"no session for token RFID-1"}' }],
    ['an empty 404', { status: 404 }],
    ['204', { status: 204 }],
    ['200 with an empty body', { status: 200, headers: { 'content-type': 'application/json' } }],
  ];
  for (const [name, a] of service) {
    it(`${name}: no session (record null)`, async () => {
      answer = a;
      const res = await client.getProgress('RFID-1');
      assert.equal(res.record, null);
    });
  }
});
