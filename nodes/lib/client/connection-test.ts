/**
 * The config dialog's "Test connection": a token with the values being edited
 * (and, if the configured client authentication is refused, which other one
 * the server accepts), then one progress query for a token that cannot exist,
 * to show that the base URL reaches the service and that it accepts the token.
 * Every outcome is one line a person can act on; what failed is named, never a secret.
 */
import crypto from 'node:crypto';
import { transportReason } from './classify';
import type { Waits } from './deadlines';
import { gatewayRefusal, looksLikeNoSession } from './gateway';
import type { Redactor } from './redactor';
import { describeBody } from './response-body';
import { AUTH_METHODS, type AuthMethod, isInvalidClient, type TokenEndpoint } from './token-endpoint';
import { type Destination, type RawResponse, TransportError } from './transport';

export interface ConnectionReport {
  ok: boolean;
  /** one line for the person testing: what worked, or what to fix */
  message: string;
  /** the token's lifetime in seconds, when one was issued */
  expiresIn?: number;
  /** false when the service was not probed (the message says why) */
  probed?: boolean;
  /** another client authentication that the token endpoint accepts where the configured one was refused */
  suggestedAuthMethod?: AuthMethod;
}

/** What the test uses of a ServiceClient: its endpoints and limits, not its request pipeline. */
export interface ConnectionTestContext {
  /** the token endpoint with the configured client authentication, and one with another */
  tokenEndpoint: (method: AuthMethod) => TokenEndpoint;
  authMethod: AuthMethod;
  service: Destination;
  sessionsUrl: string;
  /** the path the service's sessions live under, for the message when the base URL has none */
  sessionsPath: string;
  /** scheme://host of the service, for messages */
  where: string;
  extraHeaders: Record<string, string> | undefined;
  waits: Waits;
  redactor: Redactor;
  timeoutMs: number;
}

/** skipProbe: why the token may not be sent to the base URL (see test-connection.ts); then the service is not probed. */
export async function testConnection(ctx: ConnectionTestContext, opts: { skipProbe?: string } = {}): Promise<ConnectionReport> {
  const issued = await issueToken(ctx);
  if ('report' in issued) return issued.report;
  const { accessToken, expiresIn } = issued;
  const validity = `token received (valid ${expiresIn !== undefined ? `${expiresIn} s` : '30 min, assumed'})`;
  if (opts.skipProbe) return { ok: true, probed: false, expiresIn, message: `Token endpoint OK: ${validity}. The service was not probed: ${opts.skipProbe}` };
  const probe = await probeService(ctx, accessToken);
  return { ok: probe.ok, expiresIn, message: probe.ok ? `Connected: ${validity}; ${probe.message}` : `${validity[0].toUpperCase()}${validity.slice(1)}, but ${probe.message}` };
}

/** A token with the configured client authentication; refused as invalid_client, the one other method that works, as a report. */
async function issueToken(ctx: ConnectionTestContext): Promise<{ accessToken: string; expiresIn?: number } | { report: ConnectionReport }> {
  const configured = ctx.authMethod;
  try {
    return await ctx.tokenEndpoint(configured).request();
  } catch (err) {
    if (!isInvalidClient(err)) throw err;
    for (const other of AUTH_METHODS.filter((m) => m !== configured)) {
      try {
        const issued = await ctx.tokenEndpoint(other).request();
        return {
          report: {
            ok: false,
            suggestedAuthMethod: other,
            expiresIn: issued.expiresIn,
            message: `The token endpoint refused the credentials sent as "${configured}" but accepts "${other}": switch Authentication to "${other}"?`,
          },
        };
      } catch {
        // try the next one
      }
    }
    throw err;
  }
}

async function probeService(ctx: ConnectionTestContext, accessToken: string): Promise<{ ok: boolean; message: string }> {
  const probe = `connection-test-${crypto.randomBytes(6).toString('hex')}`;
  const { where, extraHeaders } = ctx;
  const ex = ctx.waits.exchange(ctx.timeoutMs);
  let res: RawResponse;
  try {
    res = await ctx.service.send({ method: 'GET', url: `${ctx.sessionsUrl}?token=${probe}`, headers: { ...extraHeaders, Authorization: `Bearer ${accessToken}`, Accept: 'application/json' } }, ex);
  } catch (err) {
    if (!(err instanceof TransportError)) throw err;
    return { ok: false, message: `the service at ${where} could not be reached: ${transportReason(err, ctx.timeoutMs)}. Check the base URL.` };
  } finally {
    ctx.waits.finished(ex);
  }
  const text = describeBody(res.text, ctx.redactor);
  const said = text ? ` (${text})` : '';
  const gateway = gatewayRefusal(res, !!extraHeaders);
  if (gateway) return { ok: false, message: `${gateway} at ${where} refused the request (${res.status}${said}): ${extraHeaders ? 'check the API key and its header name' : 'it may want an API key (set API key and its header)'}; the token was not looked at` };
  if (res.status === 401 || res.status === 403) {
    return { ok: false, message: `the service at ${where} refused it (${res.status}${said}). Check the scopes, and that the token URL belongs to this service.` };
  }
  if (res.status === 404 && !looksLikeNoSession(res.text ?? '', probe)) {
    return { ok: false, message: `${where} has no ${ctx.sessionsPath} (404${said}). Check the base URL.` };
  }
  if (res.status >= 500) return { ok: true, message: `the service answers, but reported a problem (${res.status}${said})` };
  return { ok: true, message: `the service at ${where} answers (progress query: ${res.status})` };
}
