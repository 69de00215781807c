/**
 * The benchmark's service, in its own process so that its CPU is not what we
 * measure: the token endpoint (20 ms, as a real one takes a moment), progress
 * records whose meter advances on every query (so a watcher emits on every
 * poll), and 202 for commands. Latency can be set over IPC (a real service is
 * not on loopback). Counts requests; the parent asks over IPC.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const TOKEN = JSON.stringify({ access_token: 'bench-token-value', token_type: 'Bearer', expires_in: 1800 });
const counts = { token: 0, get: 0, post: 0, firstGetAt: 0 };
/** GETs by the token's first letter: the side-by-side watch contenders each poll tokens of their own letter */
let getsBy: Record<string, number> = {};
let meter = 12_000;
let latencyMs = 0;

function record(token: string): string {
  // 7 Wh per query, so every poll sees the meter move; wraps within a plausible
  // session (< 100 kWh) so that no contender logs a range warning.
  meter = meter >= 100_000 ? 12_007 : meter + 7;
  return JSON.stringify({
    eventType: 'Updated',
    timestamp: '2026-11-22T12:30:00',
    createdAt: '2026-11-22T12:00:00Z',
    evseId: 1,
    connectorId: null,
    tokenId: token,
    locationId: 'LOC-1',
    locationUid: '2a7c3bbd-3f1e-4a5a-9c55-0d1ea1c0ffee',
    transactionData: { transactionId: 'TX-1', cdrId: '9b1f5d2e-7c44-4b9a-8f2f-2d5b8f8e1a00', meterStart: 12_000, meterEnd: meter },
  });
}

function later(fn: () => void): void {
  if (latencyMs > 0) setTimeout(fn, latencyMs);
  else fn();
}

const server = http.createServer((req, res) => {
  const [path, query = ''] = (req.url ?? '').split('?');
  req.resume();
  req.on('end', () => {
    if (path === '/auth/v1/token') {
      counts.token++;
      setTimeout(() => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(TOKEN) });
        res.end(TOKEN);
      }, 20);
      return;
    }
    if (path === '/poi/v1/charging-sessions' && req.method === 'GET') {
      if (counts.get++ === 0) counts.firstGetAt = Date.now();
      const token = new URLSearchParams(query).get('token') ?? '';
      getsBy[token[0]] = (getsBy[token[0]] ?? 0) + 1;
      const body = record(token);
      later(() => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      });
      return;
    }
    if (path === '/poi/v1/charging-sessions' && req.method === 'POST') {
      counts.post++;
      later(() => {
        res.writeHead(202, { 'Content-Length': '0' });
        res.end();
      });
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
process.on('message', (m: { cmd: string; ms?: number }) => {
  if (m.cmd === 'counts') process.send?.({ counts });
  if (m.cmd === 'getsBy') process.send?.({ getsBy });
  if (m.cmd === 'reset') {
    counts.token = counts.get = counts.post = counts.firstGetAt = 0;
    getsBy = {};
    process.send?.({ reset: true });
  }
  if (m.cmd === 'latency') {
    latencyMs = m.ms ?? 0;
    process.send?.({ latency: latencyMs });
  }
  if (m.cmd === 'exit') server.close(() => process.exit(0));
});
