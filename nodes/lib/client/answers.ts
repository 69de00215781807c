/**
 * The service's answers as the nodes get them: a progress record (or none),
 * a command's result. Which statuses are answers rather than failures, and
 * what a body that cannot be read means for each: a progress query without a
 * readable record failed; a command the service accepted stays accepted.
 */
import { ChargingError } from '../errors';
import type { ProgressRecord } from '../session/record';
import { bodyProblemText } from './classify';
import { notFoundError } from './gateway';
import type { Redactor } from './redactor';
import { readJson } from './response-body';
import type { RawResponse } from './transport';

export interface ActionResult {
  statusCode: number;
  /** the 2xx body: parsed JSON, text, or null when empty or unreadable (spec §4.1: not shown) */
  body: unknown;
  /** set when the body of an accepted command could not be read: what happened to it */
  bodyNote?: string;
}

export interface ProgressResult {
  statusCode: number;
  /** the record as the service returned it, or null when there is no session */
  record: ProgressRecord | null;
}

/** What reading an answer needs to know: where it came from and the limits it was read under. */
export interface AnswerContext {
  redactor: Redactor;
  /** scheme://host of the service, for messages */
  where: string;
  timeoutMs: number;
  maxBodyBytes: number;
}

export const PROGRESS_QUERY = 'progress query';

/** Statuses a progress query hands back rather than throws: any 2xx, and 404 (no session, or no such path: see notFoundError). */
export const progressAnswer = (s: number): boolean => (s >= 200 && s < 300) || s === 404;
/** Statuses a command hands back rather than throws: any 2xx (the caller flags one that is not 202). */
export const commandAnswer = (s: number): boolean => s >= 200 && s < 300;

/** 404, 204 and an empty body mean "no session": record null. A 404 that is not the service's own is an error. */
export function readProgress(res: RawResponse, ctx: AnswerContext): ProgressResult {
  if (res.status === 404) {
    const notService = notFoundError(res, { method: 'GET', what: 'Progress query' }, ctx.where, ctx.redactor);
    if (notService) throw notService;
  }
  if (res.status === 404 || res.status === 204) return { statusCode: res.status, record: null };
  const body = readJson(res.text ?? '', ctx.redactor, PROGRESS_QUERY, res.status);
  if (body === null) return { statusCode: res.status, record: null };
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ChargingError('BAD_RESPONSE', `Progress query: the service answered ${res.status} with a body that is not a progress record (${Array.isArray(body) ? 'an array' : typeof body})`, {
      statusCode: res.status,
    });
  }
  return { statusCode: res.status, record: body as ProgressRecord };
}

/** An accepted command whose body cannot be read is still accepted, with a bodyNote: it reached the station. */
export function readCommandResult(res: RawResponse, action: string, ctx: AnswerContext): ActionResult {
  if (res.text === null) {
    return { statusCode: res.status, body: null, bodyNote: `The service accepted ${action} (${res.status}), but ${bodyProblemText(res, ctx.timeoutMs, ctx.maxBodyBytes)}: the command reached the station.` };
  }
  let body: unknown;
  try {
    body = readJson(res.text, ctx.redactor, action, res.status);
  } catch (err) {
    // Spec §4.1: the 202 body is not shown. Text that is not JSON (or JSON too deep) is passed on as a note, not as data.
    return { statusCode: res.status, body: null, bodyNote: `The service accepted ${action} (${res.status}); ${(err as Error).message.replace(/^[^:]*: /, '')}.` };
  }
  return { statusCode: res.status, body };
}
