/**
 * The token endpoint (spec §4.3, RFC 6749 client credentials) and the tokens it
 * issued: checked on every service request, revoked by faults or by tests.
 */
import crypto from 'node:crypto';
import { bearerOf, json, type Reply } from './reply';
import type { RecordedRequest, ResolvedOptions, SimulatorCounters } from './types';

export class TokenEndpoint {
  private readonly tokens = new Map<string, { expiresAt: number; revoked: boolean }>();

  constructor(
    private readonly options: ResolvedOptions,
    private readonly counters: SimulatorCounters,
    private readonly now: () => number,
  ) {}

  /** Revoke one token (the revoke fault): the next request with it gets 401. */
  revoke(bearer: string): void {
    const t = this.tokens.get(bearer);
    if (t) t.revoked = true;
  }

  revokeAll(): void {
    for (const t of this.tokens.values()) t.revoked = true;
  }

  clear(): void {
    this.tokens.clear();
  }

  /** A token request (spec §4.3): the client's credentials checked the configured way, a token issued. */
  handle(rec: RecordedRequest, res: Reply): void {
    if (rec.method !== 'POST') return json(res, 405, { error: 'invalid_request', error_description: 'use POST' });
    const client = this.clientOf(rec);
    if ('refused' in client) {
      return json(res, 401, { error: 'invalid_client', error_description: client.refused }, this.options.authMethod === 'client_secret_post' ? {} : { 'WWW-Authenticate': 'Basic realm="token"' });
    }
    if (!safeEqual(client.id, this.options.clientId) || !safeEqual(client.secret, this.options.clientSecret)) {
      return json(res, 401, { error: 'invalid_client', error_description: 'client authentication failed' });
    }
    const accept = rec.headers.accept ?? '';
    if (!/application\/json/.test(accept)) return json(res, 406, { error: 'invalid_request', error_description: 'Accept: application/json required' });
    const ctype = rec.headers['content-type'] ?? '';
    if (!/^application\/x-www-form-urlencoded/.test(ctype)) {
      return json(res, 400, { error: 'invalid_request', error_description: 'form-encoded body required' });
    }
    const form = new URLSearchParams(rec.body);
    if (form.get('grant_type') !== 'client_credentials') {
      return json(res, 400, { error: 'unsupported_grant_type', error_description: 'grant_type must be client_credentials' });
    }
    const scopes = (form.get('scope') ?? '').split(' ').filter(Boolean);
    if (this.options.allowedScopes.length > 0) {
      const bad = scopes.filter((s) => !this.options.allowedScopes.includes(s));
      if (bad.length > 0) return json(res, 400, { error: 'invalid_scope', error_description: `unknown scope ${bad.join(' ')}` });
    }
    const value = crypto.randomBytes(24).toString('base64url');
    const lifetime = this.options.tokenLifetimeSec;
    this.tokens.set(value, { expiresAt: this.now() + lifetime * 1000, revoked: false });
    this.counters.tokensIssued++;
    // Forget long-expired tokens so a months-long demo does not grow.
    if (this.tokens.size > 1000) for (const [k, t] of this.tokens) if (t.expiresAt < this.now()) this.tokens.delete(k);
    const body: Record<string, unknown> = { access_token: value, token_type: 'Bearer', scope: scopes.join(' ') };
    if (!this.options.omitExpiresIn) body.expires_in = this.options.advertisedLifetimeSec;
    json(res, 200, body, { 'Cache-Control': 'no-store' });
  }

  /** The client's id and secret, read the way the configured client authentication sends them. */
  private clientOf(rec: RecordedRequest): { id: string; secret: string } | { refused: string } {
    if (this.options.authMethod === 'client_secret_post') {
      const form = new URLSearchParams(rec.body);
      if (rec.headers.authorization) return { refused: 'this server takes client_id and client_secret in the form body (client_secret_post), not an Authorization header' };
      return { id: form.get('client_id') ?? '', secret: form.get('client_secret') ?? '' };
    }
    const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(rec.headers.authorization ?? '');
    if (!m) return { refused: 'Basic client credentials required' };
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    let id = colon >= 0 ? decoded.slice(0, colon) : decoded;
    let secret = colon >= 0 ? decoded.slice(colon + 1) : '';
    if (this.options.authMethod === 'basic-form-encoded') {
      // RFC 6749 §2.3.1: each part was form-urlencoded; a raw "+" or "%" decodes to something else.
      const formDecode = (v: string) => {
        try {
          return decodeURIComponent(v.replace(/\+/g, ' '));
        } catch {
          return '\u0000';
        }
      };
      id = formDecode(id);
      secret = formDecode(secret);
    }
    return { id, secret };
  }

  /** Why a service request's bearer token is refused, or null when it is good. */
  authorise(rec: RecordedRequest): string | null {
    const bearer = bearerOf(rec);
    if (!bearer) return 'missing bearer token';
    const t = this.tokens.get(bearer);
    if (!t) return 'unknown token';
    if (t.revoked) return 'token revoked';
    if (this.now() >= t.expiresAt) return 'token expired';
    return null;
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}
