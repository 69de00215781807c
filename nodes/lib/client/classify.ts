/**
 * What an exchange's result means (DESIGN §3): every way a request can fail
 * becomes a ChargingError with a code, a message a person can act on, and
 * whether a retry may help. The bodies themselves are read in response-body.ts.
 */
import { ChargingError, closedError } from '../errors';
import { parseRetryAfter } from './backoff';
import type { RawResponse, TransportError } from './transport';

export interface Operation {
  method: 'GET' | 'POST';
  /** words for messages: "START", "STOP", "progress query" */
  what: string;
}

/** Words for an HTTP exchange that ended without an answer (no headers). */
export function transportReason(err: TransportError, allowedMs: number): string {
  switch (err.failure) {
    case 'dns':
      return `could not resolve host ${err.host} (${err.code})`;
    case 'not-sent':
      return err.code === 'ECONNREFUSED' ? `connection refused by ${err.where ?? 'the server'} (ECONNREFUSED)` : `could not connect to ${err.where ?? 'the server'} (${err.code})`;
    case 'tls':
      return `the TLS handshake failed (${err.code}): ${tlsHint(err.code)}`;
    case 'proxy':
      return proxyReason(err);
    case 'invalid':
      return `the request could not be built (${err.code})`;
    case 'deadline':
      return err.stage ? noConnection(err, allowedMs) : `no answer within ${allowedMs} ms`;
    case 'closed':
      return 'the configuration was closed while it was on the wire';
    case 'failed':
      return `the connection failed (${err.code})`;
  }
}

/** Words for a deadline that passed before the request could be written: where it was stuck. */
function noConnection(err: TransportError, allowedMs: number): string {
  const where = err.where ?? 'the server';
  const stuck: Record<NonNullable<TransportError['stage']>, string> = {
    queued: 'no connection was free',
    lookup: `the DNS lookup of ${err.host} did not finish`,
    connect: 'the TCP connection was not established',
    proxy: `the proxy ${err.proxy ?? ''} did not open a tunnel`.replace('  ', ' '),
    tls: 'the TLS handshake did not finish',
  };
  return `no connection to ${where} within ${allowedMs} ms (${stuck[err.stage ?? 'queued']})`;
}

/**
 * What a TLS handshake failure means, from its code: the cause a person can fix.
 * The codes are OpenSSL's as Node reports them (X509 verify codes, SSL alerts).
 */
export function tlsHint(code: string): string {
  if (/CERT_HAS_EXPIRED/.test(code)) return "the server's certificate has expired (or this machine's clock is wrong): the server needs a renewed certificate";
  if (/CERT_NOT_YET_VALID/.test(code)) return "the server's certificate is not valid yet: check this machine's clock";
  if (/ALTNAME|HOSTNAME_MISMATCH/.test(code)) return 'the host name in the URL is not one the certificate was issued for: use the name in the certificate, or ask for a certificate that covers this name';
  if (/CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|BAD_CERTIFICATE|UNKNOWN_CA|CERTIFICATE_UNKNOWN|ACCESS_DENIED/.test(code)) {
    return 'the server refused the handshake; it probably requires a client certificate: set certificate and private key in the TLS configuration of the service node';
  }
  if (/SELF_SIGNED/.test(code)) return 'the server uses a self-signed certificate (or one from a private CA): set that certificate or its CA as the CA in a TLS configuration on the service node';
  if (/UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE/.test(code)) {
    return "the certificate's issuer is not known here: set the CA certificate (the whole chain for a private CA) in a TLS configuration on the service node, or the server must send its intermediate certificates";
  }
  if (/^EPROTO$|WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|HTTP_REQUEST|^ECONNRESET$|^EPIPE$|^ERR_TLS_HANDSHAKE$|UNEXPECTED_EOF|^ECONNABORTED$/.test(code)) {
    return 'the server did not speak TLS on this port (plain http on an https port?): check the scheme and port of the URL';
  }
  return 'check the URL and the TLS configuration of the service node (CA, certificate and key)';
}

/** Words for a failure at the proxy: names the proxy, never its credentials. */
function proxyReason(err: TransportError): string {
  const proxy = err.proxy ? `the proxy ${err.proxy}` : 'the proxy';
  if (err.proxyStatus === 407) return `${proxy} refused the request: 407 Proxy Authentication Required. Set the proxy's user and password in the proxy URL (http://user:password@host:port)`;
  if (err.proxyStatus) return `${proxy} answered ${err.proxyStatus} to CONNECT: it could not open a tunnel to the service`;
  if (/^(ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME)$/.test(err.code)) return `could not resolve the host of ${proxy} (${err.code})`;
  if (/^(ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EADDRNOTAVAIL)$/.test(err.code)) return `could not connect to ${proxy} (${err.code})`;
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|^EPROTO$/i.test(err.code)) return `the TLS handshake with ${proxy} failed (${err.code}): ${tlsHint(err.code)}`;
  // Reset or closed after it was reached, a hang-up, an answer that is not HTTP: the CONNECT got no answer we can use.
  return `${proxy} gave no valid answer to CONNECT (${err.code}: it closed or reset the connection, or did not speak HTTP)`;
}

/** A service exchange (START, STOP, progress) that ended without an answer. */
export function transportError(err: TransportError, op: Operation, where: string, allowedMs: number): ChargingError {
  const cause = err.code;
  switch (err.failure) {
    case 'dns':
    case 'not-sent':
      // Surely not processed: safe to retry, POST included. No word about TLS: the handshake never began.
      return new ChargingError('NETWORK', `${op.what}: ${transportReason(err, allowedMs)}${err.proxy ? ` (through the proxy ${err.proxy})` : ''}; nothing was sent`, { cause, retryable: true });
    case 'tls':
      // The request is written only after the handshake: nothing was sent, and sending again would fail the same way.
      return new ChargingError('NETWORK', `${op.what}: TLS handshake with ${where}${err.proxy ? ` (through the proxy ${err.proxy})` : ''} failed (${err.code}): ${tlsHint(err.code)}. Nothing was sent.`, { cause });
    case 'proxy':
      return new ChargingError('NETWORK', `${op.what}: ${proxyReason(err)}; nothing reached ${where}`, { cause, statusCode: err.proxyStatus, retryable: err.proxyStatus !== 407 });
    case 'invalid':
      return new ChargingError('INTERNAL', `${op.what} could not be sent: ${transportReason(err, allowedMs)}. Nothing was sent; please report this.`, { cause });
    case 'closed':
      // Cut before it could be written: nothing reached the service, whatever the method.
      if (err.stage) return closedError('configuration');
      return op.method === 'POST' ? outcomeUnknown(op, transportReason(err, allowedMs), { cause }) : closedError('configuration');
    case 'deadline':
      if (err.stage) return new ChargingError('NETWORK', `${op.what}: ${noConnection(err, allowedMs)}; nothing was sent`, { cause, retryable: true });
      if (op.method === 'POST') return outcomeUnknown(op, `no answer within ${allowedMs} ms`, { cause });
      return new ChargingError('TIMEOUT', `${op.what}: no answer from ${where} within ${allowedMs} ms`, { cause, retryable: true });
    case 'failed':
      if (op.method === 'POST') return outcomeUnknown(op, `the connection failed (${err.code})`, { cause });
      return new ChargingError('NETWORK', `${op.what}: the connection to ${where} failed (${err.code})`, { cause, retryable: true });
  }
}

/** True for a failure that surely never reached the server (no connection): a service restarting, a DNS blip, a proxy not letting us through. */
export function unreached(err: TransportError): boolean {
  return err.failure === 'dns' || err.failure === 'not-sent' || (err.failure === 'deadline' && err.stage !== undefined) || (err.failure === 'proxy' && err.proxyStatus !== 407);
}

/** Words for a body that did not arrive in full after the headers did. */
export function bodyProblemText(res: RawResponse, allowedMs: number, maxBodyBytes: number): string {
  switch (res.bodyProblem) {
    case 'deadline':
      return `its body did not arrive in full within ${allowedMs} ms`;
    case 'too-large':
      return `its body was larger than allowed (${maxBodyBytes} bytes)`;
    case 'closed':
      return 'its body was abandoned on close';
    default:
      return res.announcedBytes !== undefined ? `its body was cut short (${res.announcedBytes} bytes announced)` : 'its body was cut short';
  }
}

/** A progress query answered 2xx whose body could not be read in full. */
export function bodyProblemError(res: RawResponse, op: Operation, where: string, allowedMs: number, maxBodyBytes: number): ChargingError {
  const said = `${op.what}: ${where} answered ${res.status}, but ${bodyProblemText(res, allowedMs, maxBodyBytes)}`;
  switch (res.bodyProblem) {
    case 'deadline':
      return new ChargingError('TIMEOUT', said, { statusCode: res.status, retryable: true });
    case 'too-large':
      return new ChargingError('BAD_RESPONSE', said, { statusCode: res.status });
    case 'closed':
      return closedError('configuration');
    default:
      return new ChargingError('NETWORK', said, { statusCode: res.status, retryable: true });
  }
}

/** A status the operation does not accept. `text` is the service's own words, already redacted and cut. */
export function statusError(res: RawResponse, op: Operation, text: string | undefined, afterFreshToken: boolean): ChargingError {
  const status = res.status;
  const said = text ? `: ${text}` : '';
  if (status === 401) {
    return new ChargingError(
      'AUTH',
      afterFreshToken
        ? `${op.what} refused with 401 Unauthorized even with a freshly issued token${said}. Check the client's scopes and that the token URL belongs to this service.`
        : `${op.what} refused with 401 Unauthorized${said}`,
      { statusCode: 401, serviceMessage: text },
    );
  }
  if (status === 407) {
    // Only a proxy answers 407 (RFC 9110 §15.5.8): the request never went past it.
    return new ChargingError('NETWORK', `${op.what} refused by the proxy: 407 Proxy Authentication Required${said}. Nothing reached the service; set the proxy's user and password in the proxy URL (http://user:password@host:port)`, {
      statusCode: 407,
      serviceMessage: text,
    });
  }
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
    const wait = retryAfterMs !== undefined ? ` (Retry-After ${Math.ceil(retryAfterMs / 1000)} s)` : '';
    return new ChargingError('RATE_LIMITED', `${op.what} rate-limited by the service: 429 Too Many Requests${wait}${said}`, {
      statusCode: 429,
      serviceMessage: text,
      retryable: true,
      retryAfterMs,
    });
  }
  if (status >= 500) {
    if (op.method === 'POST') return outcomeUnknown(op, `the service answered ${status}${said}`, { statusCode: status, serviceMessage: text });
    return new ChargingError('HTTP', `${op.what} failed: the service answered ${status}${said}`, {
      statusCode: status,
      serviceMessage: text,
      retryable: true,
      retryAfterMs: parseRetryAfter(res.headers['retry-after']),
    });
  }
  return new ChargingError('HTTP', `${op.what} failed: the service answered ${status}${said}`, { statusCode: status, serviceMessage: text });
}

export function outcomeUnknown(op: Operation, why: string, details: { statusCode?: number; serviceMessage?: string; cause?: string }): ChargingError {
  return new ChargingError(
    'OUTCOME_UNKNOWN',
    `${op.what} may or may not have reached the station: ${why}. It was not sent again, to avoid a duplicate ${op.what}; query the session's progress to see whether it took effect.`,
    { ...details, outcomeUnknown: true },
  );
}

