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
  | 'TIMEOUT' // no (complete) answer in time
  | 'OUTCOME_UNKNOWN' // a START/STOP may have reached the station; not repeated
  | 'BAD_RESPONSE' // a 2xx we cannot read
  | 'NOT_CONFIRMED' // a wait for a session to start/end ran out
  | 'NOT_STOPPED' // "make sure it ends": the session was still active after the last STOP
  | 'NO_SESSION' // an action needed a session and there is none
  | 'NO_RECORD' // the ledger has no record with that id
  | 'CLOSED' // the node or config was closed (redeploy) while the request waited
  | 'INTERNAL'; // a failure in this package itself: please report it

export interface ChargingErrorDetails {
  statusCode?: number;
  /** the service's own error text, redacted, then shortened */
  serviceMessage?: string;
  /** set on START/STOP failures where the station may have acted */
  outcomeUnknown?: boolean;
  /** the input field that was missing or invalid */
  field?: string;
  /** whether retrying the same request could help (used by the retry policy) */
  retryable?: boolean;
  /** Retry-After in ms, when the server sent one */
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

  /** The same error with another message and the same facts (e.g. "gave up after 4 attempts"). */
  withMessage(message: string): ChargingError {
    return new ChargingError(this.code, message, {
      statusCode: this.statusCode,
      serviceMessage: this.serviceMessage,
      outcomeUnknown: this.outcomeUnknown,
      field: this.field,
      retryable: this.retryable,
      retryAfterMs: this.retryAfterMs,
      cause: this.causeCode,
    });
  }

  /**
   * Node-RED puts `err.toString()` into msg.error.message: the message alone,
   * one readable line, as core nodes read ("ChargingError: " helps nobody).
   */
  override toString(): string {
    return this.message;
  }

  /** An error as toJSON() gave it (from another replica, through Redis); an unknown code reads INTERNAL. */
  static fromJSON(data: Record<string, unknown>, note = ''): ChargingError {
    const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
    const code = str(data.code) ?? 'INTERNAL';
    return new ChargingError(code as ChargingErrorCode, `${str(data.message) ?? 'failed'}${note}`, {
      statusCode: typeof data.statusCode === 'number' ? data.statusCode : undefined,
      serviceMessage: str(data.serviceMessage),
      outcomeUnknown: data.outcomeUnknown === true,
      field: str(data.field),
      cause: str(data.cause),
    });
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

/** The one CLOSED error: work abandoned because its node or its configuration closed. */
export function closedError(what: 'node' | 'configuration'): ChargingError {
  const who = what === 'node' ? 'The node' : 'The service configuration';
  return new ChargingError('CLOSED', `${who} was closed (redeploy or shutdown); the request was abandoned`);
}
