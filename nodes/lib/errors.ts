/**
 * The one error type of the package. Every failure a node reports is a
 * ChargingError, built from facts we chose to keep (status, the service's text,
 * a code) and never from a raw axios error: those carry the request config,
 * and with it the Authorization header.
 */
export type ChargingErrorCode =
  | 'MISSING_FIELD' // a required input is absent; nothing was sent
  | 'INVALID_INPUT' // an input has the wrong type or shape; nothing was sent
  | 'CONFIG' // the config node is missing or wrong
  | 'AUTH' // the token endpoint refused us, or the service refused a fresh token
  | 'HTTP' // the service answered with an error status
  | 'RATE_LIMITED' // 429 and we ran out of patience
  | 'NETWORK' // no answer: refused, reset, DNS, TLS
  | 'TIMEOUT' // no answer in time
  | 'OUTCOME_UNKNOWN' // a START/STOP may have reached the station; not repeated
  | 'BAD_RESPONSE' // a 2xx we cannot read
  | 'NOT_CONFIRMED' // a wait for a session to start/end ran out
  | 'NO_SESSION' // an action needed a session and there is none
  | 'CLOSED' // the node or config was closed (redeploy) while the request waited
  | 'INTERNAL'; // a failure in this package itself: please report it

export interface ChargingErrorDetails {
  statusCode?: number;
  /** the service's own error text, truncated and redacted */
  serviceMessage?: string;
  /** set on START/STOP failures where the station may have acted */
  outcomeUnknown?: boolean;
  /** the input field that was missing or invalid */
  field?: string;
  /** whether retrying the same request could help (used by the retry policy) */
  retryable?: boolean;
  /** Retry-After in ms, when the service sent one */
  retryAfterMs?: number;
  /** low-level code such as ECONNREFUSED */
  cause?: string;
}

export class ChargingError extends Error {
  readonly code: ChargingErrorCode;
  readonly statusCode?: number;
  readonly serviceMessage?: string;
  readonly outcomeUnknown: boolean;
  readonly field?: string;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly causeCode?: string;

  constructor(code: ChargingErrorCode, message: string, details: ChargingErrorDetails = {}) {
    super(message);
    this.name = 'ChargingError';
    this.code = code;
    this.statusCode = details.statusCode;
    this.serviceMessage = details.serviceMessage;
    this.outcomeUnknown = details.outcomeUnknown ?? false;
    this.field = details.field;
    this.retryable = details.retryable ?? false;
    this.retryAfterMs = details.retryAfterMs;
    this.causeCode = details.cause;
  }

  /** What lands in msg.error and in Node-RED's log: plain data, nothing secret. */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { name: this.name, code: this.code, message: this.message };
    if (this.statusCode !== undefined) out.statusCode = this.statusCode;
    if (this.serviceMessage !== undefined) out.serviceMessage = this.serviceMessage;
    if (this.outcomeUnknown) out.outcomeUnknown = true;
    if (this.field !== undefined) out.field = this.field;
    if (this.causeCode !== undefined) out.cause = this.causeCode;
    return out;
  }
}

export function isChargingError(err: unknown): err is ChargingError {
  return err instanceof ChargingError;
}

/** Short reason for a status badge: a few words, never a secret. */
export function shortReason(err: unknown): string {
  if (!isChargingError(err)) return 'error';
  switch (err.code) {
    case 'MISSING_FIELD':
      return `missing ${err.field ?? 'field'}`;
    case 'INVALID_INPUT':
      return `invalid ${err.field ?? 'input'}`;
    case 'HTTP':
      return `HTTP ${err.statusCode ?? ''}`.trim();
    case 'AUTH':
      return err.statusCode ? `auth failed (${err.statusCode})` : 'auth failed';
    case 'OUTCOME_UNKNOWN':
      return 'outcome unknown';
    case 'RATE_LIMITED':
      return 'rate limited';
    case 'TIMEOUT':
      return 'timeout';
    case 'NETWORK':
      return err.causeCode ? `network (${err.causeCode})` : 'network error';
    case 'BAD_RESPONSE':
      return 'bad response';
    case 'NOT_CONFIRMED':
      return 'not confirmed';
    case 'NO_SESSION':
      return 'no session';
    case 'CONFIG':
      return 'config error';
    case 'CLOSED':
      return 'closed';
    case 'INTERNAL':
      return 'internal error';
  }
}

const MAX_SERVICE_TEXT = 300;

/**
 * The service's error body as a short line of text: JSON bodies are searched for
 * the usual message fields, anything else is cut to a readable length.
 */
export function serviceText(body: unknown): string | undefined {
  if (body === undefined || body === null || body === '') return undefined;
  let text: string;
  if (typeof body === 'string') {
    const trimmed = body.trim();
    try {
      return serviceText(JSON.parse(trimmed) as unknown) ?? undefined;
    } catch {
      text = trimmed;
    }
  } else if (Buffer.isBuffer(body)) {
    return serviceText(body.toString('utf8'));
  } else if (typeof body === 'object') {
    const o = body as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of ['error', 'error_description', 'message', 'detail', 'title', 'description']) {
      const v = o[key];
      if (typeof v === 'string' && v.trim() !== '') parts.push(v.trim());
      else if (v && typeof v === 'object') {
        const nested = serviceText(v);
        if (nested) parts.push(nested);
      }
    }
    text = parts.length > 0 ? parts.join(': ') : JSON.stringify(body);
  } else {
    text = String(body);
  }
  text = text.replace(/\s+/g, ' ');
  if (text === '') return undefined;
  return text.length > MAX_SERVICE_TEXT ? `${text.slice(0, MAX_SERVICE_TEXT)}…` : text;
}
