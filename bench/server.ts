/**
 * The benchmark's service: answers the token and service paths at once with
 * fixed bodies, in its own process so that it is not what we measure. Counts
 * requests; the parent asks for the counts over IPC.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const RECORD = JSON.stringify({
  eventType: 'Updated',
  timestamp: '2026-11-22T12:30:00',
  createdAt: '2026-11-22T12:00:00Z',
  evseId: 1,
  connectorId: null,
  tokenId: 'BENCH',
  locationId: 'LOC-1',
  locationUid: '2a7c3bbd-3f1e-4a5a-9c55-0d1ea1c0ffee',
  transactionData: { transactionId: 'TX-1', cdrId: '9b1f5d2e-7c44-4b9a-8f2f-2d5b8f8e1a00', meterStart: 12000, meterEnd: 24345 },
});
const TOKEN = JSON.stringify({ access_token: 'bench-token-value', token_type: 'Bearer', expires_in: 1800 });
const counts = { token: 0, get: 0, post: 0, firstGetAt: 0 };

const server = http.createServer((req, res) => {
  const path = (req.url ?? '').split('?')[0];
  req.resume();
  req.on('end', () => {
    if (path === '/auth/v1/token') {
      counts.token++;
      // A realistic token endpoint takes a moment; 20 ms makes a stampede visible.
      setTimeout(() => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(TOKEN) });
        res.end(TOKEN);
      }, 20);
      return;
    }
    if (path === '/poi/v1/charging-sessions' && req.method === 'GET') {
      if (counts.get++ === 0) counts.firstGetAt = Date.now();
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(RECORD) });
      res.end(RECORD);
      return;
    }
    if (path === '/poi/v1/charging-sessions' && req.method === 'POST') {
      counts.post++;
      res.writeHead(202, { 'Content-Length': '0' });
      res.end();
      return;
    }
    res.writeHead(404);
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'counts') process.send?.({ counts });
  if (m.cmd === 'reset') {
    counts.token = counts.get = counts.post = counts.firstGetAt = 0;
    process.send?.({ reset: true });
  }
  if (m.cmd === 'exit') server.close(() => process.exit(0));
});
