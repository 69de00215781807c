/**
 * The status vocabulary every node uses for its badge: colours and shapes,
 * and the texts as keys of the "status" catalog with values to fill in.
 * What a badge becomes on the screen (translated, coalesced) is the board's
 * job (status-board.ts).
 */
import type { NodeStatusFill, NodeStatusShape } from 'node-red';
import { ChargingError, isChargingError } from '../lib/errors';

/**
 * A badge: colour and shape, and its text as a key of the "status" catalog in
 * nodes/locales/<lang>/charging-service.json with values to fill in. The text
 * is translated (in Node-RED's runtime language) only when the board shows it,
 * at most four times a second, not for every message.
 */
export interface NodeStatus {
  fill?: NodeStatusFill;
  shape?: NodeStatusShape;
  key?: StatusKey;
  values?: Record<string, string | number>;
  /** append the time of the change when shown */
  stamp?: boolean;
  /** values that are texts of the catalog themselves, translated before they are filled in (a badge of parts: "on → charging") */
  words?: Record<string, StatusKey>;
}

/** Every text a badge can show (the catalogs must have each, in every language: a test checks). */
export const STATUS_KEYS = [
  'starting',
  'stopping',
  'querying',
  'lookingUp',
  'startAccepted',
  'startAcceptedStatus',
  'stopAccepted',
  'stopAcceptedStatus',
  'started',
  'sessionEnded',
  'charging',
  'noSession',
  'pending',
  'waitingStart',
  'waitingEnd',
  'startNotConfirmed',
  'stopNotConfirmed',
  'stoppingAttempt',
  'sentByReplica',
  'fleetDown',
  'watchingFleet',
  'watching',
  'watchingEnergy',
  'watchingEvent',
  'watchingEnded',
  'ledger.badge',
  'ledger.memory',
  'metricsScraped',
  'control.badge',
  'control.badgeTargets',
  'control.waiting',
  'control.on',
  'control.off',
  'control.endedAtStation',
  'control.twoNodes',
  'control.nextStart',
  'control.state.idle',
  'control.state.queued',
  'control.state.starting',
  'control.state.charging',
  'control.state.stopping',
  'control.state.guard',
  'control.state.failed',
  'control.state.busy',
  'control.state.done',
  'depot.badge',
  'error.missingField',
  'error.invalidInput',
  'error.http',
  'error.authFailed',
  'error.authFailedStatus',
  'error.outcomeUnknown',
  'error.rateLimited',
  'error.timeout',
  'error.network',
  'error.networkCause',
  'error.badResponse',
  'error.notConfirmed',
  'error.notStopped',
  'error.noSession',
  'error.noRecord',
  'error.config',
  'error.closed',
  'error.internal',
  'error.other',
] as const;
export type StatusKey = (typeof STATUS_KEYS)[number];

export type Values = NodeStatus['values'];
export const Status = {
  requesting: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'blue', shape: 'dot', key, values }),
  waiting: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'blue', shape: 'ring', key, values }),
  ok: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'green', shape: 'dot', key, values, stamp: true }),
  idle: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'grey', shape: 'ring', key, values, stamp: true }),
  warn: (key: StatusKey, values?: Values): NodeStatus => ({ fill: 'yellow', shape: 'ring', key, values }),
  error: (err: unknown): NodeStatus => ({ fill: 'red', shape: 'ring', ...badgeReason(err) }),
};

/** A few words for a red badge, never a secret. */
export function badgeReason(err: unknown): { key: StatusKey; values?: Values } {
  if (!isChargingError(err)) return { key: 'error.other' };
  const e: ChargingError = err;
  switch (e.code) {
    case 'MISSING_FIELD':
      return { key: 'error.missingField', values: { field: e.field ?? 'field' } };
    case 'INVALID_INPUT':
      return { key: 'error.invalidInput', values: { field: e.field ?? 'input' } };
    case 'HTTP':
      return { key: 'error.http', values: { status: e.statusCode ?? '' } };
    case 'AUTH':
      return e.statusCode ? { key: 'error.authFailedStatus', values: { status: e.statusCode } } : { key: 'error.authFailed' };
    case 'OUTCOME_UNKNOWN':
      return { key: 'error.outcomeUnknown' };
    case 'RATE_LIMITED':
      return { key: 'error.rateLimited' };
    case 'TIMEOUT':
      return { key: 'error.timeout' };
    case 'NETWORK':
      return e.causeCode ? { key: 'error.networkCause', values: { cause: e.causeCode } } : { key: 'error.network' };
    case 'BAD_RESPONSE':
      return { key: 'error.badResponse' };
    case 'NOT_CONFIRMED':
      return { key: 'error.notConfirmed' };
    case 'NOT_STOPPED':
      return { key: 'error.notStopped' };
    case 'NO_SESSION':
      return { key: 'error.noSession' };
    case 'NO_RECORD':
      return { key: 'error.noRecord' };
    case 'CONFIG':
      return { key: 'error.config' };
    case 'CLOSED':
      return { key: 'error.closed' };
    case 'INTERNAL':
      return { key: 'error.internal' };
  }
}

/** Energy for a badge: Wh below 1 kWh (a 0.05 kWh threshold must not read "0.0 kWh"), else kWh. */
export function formatEnergy(kwh: number | null): string {
  if (kwh === null) return '';
  if (kwh < 1) return `${Math.round(kwh * 1000)} Wh`;
  return kwh >= 100 ? `${kwh.toFixed(0)} kWh` : `${kwh.toFixed(1)} kWh`;
}
