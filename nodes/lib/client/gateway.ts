/**
 * Whether an answer came from the service or from something in front of it (a
 * gateway, a load balancer, a framework's default page): a 404 that is not the
 * service's "no session", a 401/403 that is a gateway's key check. Everything
 * here reads a body of up to 1 MiB and stays linear in its size: fixed phrases
 * and index searches, never a `.*` between two words.
 */
import { ChargingError } from '../errors';
import type { Operation } from './classify';
import { describeBody, messageFields } from './response-body';
import type { Redactor } from './redactor';
import type { RawResponse } from './transport';

/**
 * A 404 to a progress query is the service's "no session" (DESIGN "No active
 * session") only when it reads like the service: an empty body, or JSON of its
 * own. An HTML page (nginx, a load balancer), plain text ("404 page not found")
 * or a gateway's own JSON (Kong "no Route matched", AWS API Gateway, Azure API
 * Management: a lost route) means the request never reached the service; read
 * as "no session", every watched session would be reported ended.
 * Returns the error for such an answer, undefined for the service's "no session".
 */
export function notFoundError(res: RawResponse, op: Operation, where: string, redactor: Redactor): ChargingError | undefined {
  const text = res.text ?? '';
  if (text.trim() === '' && !gatewayHeaders(res.headers)) return undefined;
  const what = notServiceAnswer(res, text);
  if (!what) return undefined;
  const said = describeBody(text, redactor);
  return new ChargingError(
    'HTTP',
    `${op.what} failed: ${where} answered 404 with ${what}${said ? ` (${said.slice(0, 120)})` : ''}, not the service's "no session" answer: the gateway or server has no route to the service. Check the Base URL and the gateway's routes`,
    { statusCode: 404, serviceMessage: said },
  );
}

/** Words for why a 404 is not the service's own, or undefined when it is. */
function notServiceAnswer(res: RawResponse, text: string): string | undefined {
  const gateway = gatewayHeaders(res.headers);
  if (gateway) return `${gateway}'s own answer`;
  const type = String(res.headers['content-type'] ?? '').toLowerCase();
  const trimmed = text.trimStart();
  if (type.includes('html') || trimmed.startsWith('<')) return 'an HTML page';
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'a text that is not JSON';
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'JSON that is not an object';
  const words = messageFields(body, 0) ?? '';
  if (GATEWAY_WORDS.test(words) || routeNotFound(words.toLowerCase())) return "a gateway's own JSON";
  return undefined;
}

/**
 * What gateways say when no route matches (Kong, AWS API Gateway, Azure APIM,
 * Traefik, Spring, Express): fixed phrases only, so that the regex stays linear
 * in the body's size (a body may be 1 MiB).
 */
const GATEWAY_WORDS = /no route|no matching (route|operation)|resource not found|api not found|missing authentication token|unknown (path|route|url)|no such path|page not found|cannot (get|post) \//i;

/**
 * "route … not found" on one line (Spring's "Route … not found"). Two index
 * searches instead of `/route .*not found/`, which rescans the rest of the text
 * from every "route " and is quadratic in their number.
 */
function routeNotFound(lower: string): boolean {
  // Each search starts where the last one stopped: every character is looked at a bounded number of times.
  let found = -1;
  let at = lower.indexOf('route ');
  while (at >= 0) {
    if (found < at + 6) {
      found = lower.indexOf('not found', at + 6);
      if (found < 0) return false;
    }
    const lineEnd = lower.indexOf('\n', at);
    if (lineEnd < 0 || found < lineEnd) return true;
    at = lower.indexOf('route ', lineEnd);
  }
  return false;
}

/** The gateway that answered by itself, from its headers, or undefined. */
function gatewayHeaders(headers: Record<string, unknown>): string | undefined {
  if (headers['x-amzn-errortype'] !== undefined) return 'AWS API Gateway';
  // Kong marks an answer it made itself with X-Kong-Response-Latency, a proxied one with X-Kong-Upstream-Latency.
  if (headers['x-kong-response-latency'] !== undefined && headers['x-kong-upstream-latency'] === undefined) return 'Kong';
  return undefined;
}

/**
 * An API gateway's refusal rather than the service's: AWS API Gateway marks its
 * own answers with x-amzn-ErrorType (403 for a missing or wrong key); a 401
 * without a Bearer challenge (RFC 6750 §3 asks a resource server for
 * WWW-Authenticate: Bearer) comes from something in front that wants other
 * credentials, such as Kong's or Azure API Management's key check.
 */
export function gatewayRefusal(res: RawResponse, keySent: boolean): string | undefined {
  if (res.status !== 401 && res.status !== 403) return undefined;
  if (res.headers['x-amzn-errortype'] !== undefined) return 'the API gateway (AWS)';
  const challenge = String(res.headers['www-authenticate'] ?? '');
  if (res.status === 401 && !/bearer/i.test(challenge)) return keySent || challenge !== '' ? 'a gateway in front of the service' : undefined;
  return undefined;
}

/**
 * A 404 from the service for an unknown token ("no session") rather than from a
 * server that has no such path: it names the token or speaks of a session, and
 * is not a framework's "cannot GET" page.
 */
export function looksLikeNoSession(text: string, probe: string): boolean {
  if (/cannot (get|post)|no such path|no route|route not found|<html/i.test(text)) return false;
  return text.includes(probe) || /session/i.test(text);
}
