/**
 * The benchmark's service, in its own process so that its CPU is not what we
 * measure: the token endpoint (20 ms, as a real one takes a moment), progress
 * records whose meter advances on every query (so a watcher emits on every
 * poll), and 202 for commands. Latency can be set over IPC (a real service is
 * not on loopback). Counts requests; the parent asks over IPC (bench/ipc.ts),
 * through the handle startBenchServer() gives it.
 */
import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ChildCalls, serve } from './ipc';

export type Counts = { token: number; get: number; post: number; firstGetAt: number };
type ServerCommand = { cmd: 'port' } | { cmd: 'counts' } | { cmd: 'getsBy' } | { cmd: 'reset' } | { cmd: 'latency'; ms: number } | { cmd: 'exit' };

const TOKEN = JSON.stringify({ access_token: 'bench-token-value', token_type: 'Bearer', expires_in: 1800 });
const counts: Counts = { token: 0, get: 0, post: 0, firstGetAt: 0 };
/** GETs by the token's first letter: the side-by-side watch contenders each poll tokens of their own letter */
let getsBy: Record<string, number> = {};
let meter = 12_000;
let latencyMs = 0;
/**
 * Tokens with "-s-" in them (the depot section's) have a session only once a
 * START for them arrived, as a station would: a control node asks the depot
 * for a slot before it starts one. Every other token always has one.
 */
const started = new Set<string>();
const needsStart = (token: string): boolean => token.includes('-s-');

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

/** One request: a token, a progress record, or 202 for a command. */
function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  const [path, query = ''] = (req.url ?? '').split('?');
  let text = '';
  req.on('data', (c: Buffer) => (text += c.toString()));
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
      if (needsStart(token) && !started.has(token)) {
        later(() => {
          res.writeHead(404, { 'Content-Type': 'application/json', 'Content-Length': 2 });
          res.end('{}');
        });
        return;
      }
      const body = record(token);
      later(() => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      });
      return;
    }
    if (path === '/poi/v1/charging-sessions' && req.method === 'POST') {
      counts.post++;
      try {
        const cmd = JSON.parse(text) as { action?: string; token?: string };
        if (typeof cmd.token === 'string' && needsStart(cmd.token)) {
          if (cmd.action === 'START') started.add(cmd.token);
          else started.delete(cmd.token);
        }
      } catch {
        // not a command of the depot section
      }
      later(() => {
        res.writeHead(202, { 'Content-Length': '0' });
        res.end();
      });
      return;
    }
    res.writeHead(404);
    res.end();
  });
}

/** In the forked process: listens on a free loopback port and answers the parent's calls. */
function runServer(): void {
  const server = http.createServer(answer);
  server.keepAliveTimeout = 60_000;
  const listening = new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
  serve<ServerCommand>(async (m) => {
    switch (m.cmd) {
      case 'port':
        return { port: await listening };
      case 'counts':
        return { ...counts };
      case 'getsBy':
        return { ...getsBy };
      case 'reset':
        counts.token = counts.get = counts.post = counts.firstGetAt = 0;
        getsBy = {};
        return {};
      case 'latency':
        latencyMs = m.ms;
        return {};
      case 'exit':
        setImmediate(() => server.close(() => process.exit(0)));
        return {};
    }
  });
}

/** The parent's handle on the bench service: its address, its counts, its latency. */
export interface BenchServer {
  base: string;
  counts(): Promise<Counts>;
  /** GETs by the token's first letter */
  getsBy(): Promise<Record<string, number>>;
  reset(): Promise<void>;
  setLatency(ms: number): Promise<void>;
  exit(): Promise<void>;
}

/** Forks the bench service (this file) and waits until it listens. */
export async function startBenchServer(): Promise<BenchServer> {
  const calls = new ChildCalls<ServerCommand>(fork(path.join(__dirname, 'server.js')));
  const { port } = await calls.call({ cmd: 'port' });
  return {
    base: `http://127.0.0.1:${port}`,
    counts: () => calls.call<Counts>({ cmd: 'counts' }),
    getsBy: () => calls.call({ cmd: 'getsBy' }),
    reset: async () => void (await calls.call({ cmd: 'reset' })),
    setLatency: async (ms) => void (await calls.call({ cmd: 'latency', ms })),
    exit: () => calls.exit(),
  };
}

if (require.main === module) runServer();
