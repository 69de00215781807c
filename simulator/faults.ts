/**
 * Fault injection: the armed rules and what each fault does to a request or to
 * the real answer (the kinds are listed in types.ts and docs/reliability.md).
 */
import type http from 'node:http';
import { bearerOf, CapturedAnswer, delay, json } from './reply';
import { SIDE_FAULTS, type FaultKind, type FaultRule, type FaultTarget, type RecordedRequest, type SimulatorCounters } from './types';

const NGINX_404 = '<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

/** The armed faults, each used up after its `times` matching requests. */
export class FaultBook {
  rules: FaultRule[] = [];

  constructor(private readonly counters: SimulatorCounters) {}

  add(rule: FaultRule): void {
    this.rules.push({ times: 1, ...rule, applied: 0 });
  }

  clear(): void {
    this.rules = [];
  }

  /** The first armed rule for the target (kind given: of that side fault; none: of the faults that act on the answer), used once. */
  take(target: FaultTarget, kind?: FaultKind): FaultRule | undefined {
    const rule = this.rules.find(
      (f) =>
        (kind ? f.kind === kind : !SIDE_FAULTS.has(f.kind)) &&
        (f.target === target || f.target === 'any' || (f.target === 'service' && (target === 'get' || target === 'post'))),
    );
    if (!rule) return undefined;
    rule.applied = (rule.applied ?? 0) + 1;
    if (rule.applied >= (rule.times ?? 1)) this.rules.splice(this.rules.indexOf(rule), 1);
    this.counters.faultsApplied++;
    return rule;
  }
}

/** Returns true when the fault answered (or killed) the request itself. */
export async function applyFault(f: FaultRule, rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse, revoke: (bearer: string) => void): Promise<boolean> {
  switch (f.kind) {
    case 'latency':
      await delay(f.delayMs ?? 500);
      return false;
    case 'hang':
      return true; // never answer; stop() destroys the socket
    case 'reset':
      req.socket.destroy();
      return true;
    case 'status': {
      const status = f.status ?? 500;
      res.writeHead(status, { ...(f.body ? { 'Content-Type': f.body.trim().startsWith('{') ? 'application/json' : 'text/plain' } : {}), ...(f.headers ?? {}) });
      res.end(f.body ?? '');
      return true;
    }
    case 'revoke': {
      const bearer = bearerOf(rec);
      if (bearer) revoke(bearer);
      return false;
    }
    case 'route-404':
      if (f.format === 'html') {
        res.writeHead(404, { 'Content-Type': 'text/html', Server: 'nginx' });
        res.end(NGINX_404);
      } else {
        json(res, 404, { message: 'no Route matched with those values' }, { Server: 'kong/3.9.1' });
      }
      return true;
    default:
      return false;
  }
}

/** Sends the real answer, corrupted as the fault says. */
export async function corrupt(f: FaultRule, answer: CapturedAnswer, rec: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse, target: FaultTarget): Promise<void> {
  // An empty 202 has nothing to corrupt: give it the body a real service might send.
  let body = answer.body || (target === 'post' ? JSON.stringify({ status: 'ACCEPTED' }) : '');
  const type = { 'Content-Type': 'application/json; charset=utf-8' };
  switch (f.kind) {
    case 'malformed':
      res.writeHead(answer.status, type);
      res.end('<html>Service Unavailable</html>');
      return;
    case 'cut':
    case 'truncated': {
      if (body.length < 2) body = JSON.stringify({ status: 'ACCEPTED', padding: 'xxxxxxxx' });
      res.writeHead(answer.status, { ...type, 'Content-Length': String(Buffer.byteLength(body)) });
      res.write(body.slice(0, Math.floor(body.length / 2)));
      setTimeout(() => req.socket.destroy(), 10);
      return;
    }
    case 'huge':
      res.writeHead(answer.status, type);
      res.end(`{"pad":"${'x'.repeat(f.hugeBytes ?? 5 * 1024 * 1024)}"}`);
      return;
    case 'drip': {
      res.writeHead(answer.status, { ...type, 'Content-Length': String(Buffer.byteLength(body)) });
      res.flushHeaders(); // the headers at once, then the body, slowly
      const bytes = Buffer.from(body);
      let i = 0;
      const timer = setInterval(() => {
        if (i >= bytes.length || res.destroyed) {
          clearInterval(timer);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(bytes.subarray(i, ++i));
      }, f.delayMs ?? 400);
      res.on('close', () => clearInterval(timer));
      return;
    }
    case 'deep': {
      const depth = f.depth ?? 5000;
      const nested = `${'{"x":'.repeat(depth)}1${'}'.repeat(depth)}`;
      const base = body.trim().startsWith('{') ? body.trim().slice(0, -1) + (body.trim() === '{}' ? '' : ',') : '{';
      res.writeHead(answer.status, type);
      res.end(`${base}"extra":${nested}}`);
      return;
    }
    case 'echo': {
      const seen = { authorization: rec.headers.authorization ?? null, body: rec.body };
      if (f.status) return json(res, f.status, { error: 'bad_request', message: `rejected request with Authorization: ${seen.authorization} and body ${seen.body}` });
      let value: Record<string, unknown> = {};
      try {
        value = body ? (JSON.parse(body) as Record<string, unknown>) : {};
      } catch {
        // not JSON: replaced
      }
      return json(res, answer.status, { ...value, echo: seen });
    }
  }
  res.writeHead(answer.status, answer.headers);
  res.end(body);
}
