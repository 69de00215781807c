/**
 * How the simulator writes answers: to the real response, or to a capture that a
 * fault then corrupts on its way out. Small helpers every part shares.
 */
import type { RecordedRequest } from './types';

/** What the service's handlers write to: a real response, or a capture to be corrupted by a fault. */
export interface Reply {
  writeHead(status: number, headers?: Record<string, string>): unknown;
  end(body?: string): unknown;
}

export class CapturedAnswer implements Reply {
  status = 200;
  headers: Record<string, string> = {};
  body = '';
  writeHead(status: number, headers: Record<string, string> = {}): this {
    this.status = status;
    this.headers = headers;
    return this;
  }
  end(body = ''): this {
    this.body = body;
    return this;
  }
}

export function json(res: Reply, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

export function bearerOf(rec: RecordedRequest): string | null {
  const m = /^Bearer (\S+)$/.exec(rec.headers.authorization ?? '');
  return m ? m[1] : null;
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
