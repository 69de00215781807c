/** The "wait until started / ended" option shared by charging-start and charging-stop. */
import { setTimeout as sleep } from 'node:timers/promises';
import type { NodeMessage } from 'node-red';
import { closedError, isChargingError } from '../lib/errors';
import { positiveNumber, waitTimeoutMs } from '../lib/settings';
import type { ProgressRecord } from '../lib/session/record';
import type { ChargingCommand } from '../lib/session/commands';
import { ensureStop, notStopped } from '../lib/session/ensure-stop';
import { deriveSession, sessionTotals } from '../lib/session/record';
import { waitForSession } from '../lib/session/wait';
import type { Outputs, WorkContext } from './node-lifecycle';
import { NodeStatus, Status } from './status';

export interface WaitConfig {
  /** wait after the 202 until progress confirms */
  wait?: boolean;
  /** seconds */
  waitTimeout?: string | number;
  /** send to a second output on timeout instead of raising an error */
  timeoutOutput?: boolean;
}

export interface EnsureConfig extends WaitConfig {
  /** "Make sure it ends": STOP again while the session goes on */
  ensure?: boolean;
  /** STOPs in all, 1–10 */
  ensureAttempts?: string | number;
}

/** Milliseconds between polls while waiting: often enough to feel immediate, rarely enough to be harmless. */
export const WAIT_POLL_MS = 1_000;

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return sleep(ms, undefined, { signal }).catch(() => {
    throw closedError('node');
  });
}

/**
 * Waits until `want` holds, then lets `onConfirmed` complete the message and
 * sends it on output 1. A timeout (NOT_CONFIRMED) goes to output 2 with
 * msg.outcome = "not confirmed" when that output is enabled, else it is raised.
 */
export async function sendWhenConfirmed(
  out: NodeMessage & { outcome?: string },
  token: string,
  want: (r: ProgressRecord | null) => boolean,
  what: 'START' | 'STOP',
  config: WaitConfig,
  ctx: WorkContext,
  onConfirmed: (record: ProgressRecord | null) => NodeStatus,
): Promise<Outputs> {
  const twoOutputs = config.timeoutOutput === true;
  ctx.status(Status.waiting(what === 'START' ? 'waitingStart' : 'waitingEnd'));
  try {
    const record = await waitForSession(
      // The wait hands each poll a signal that also carries the node's close.
      async (t, signal) => (await ctx.client.getProgress(t, { signal: signal ?? ctx.signal })).record,
      token,
      want,
      what,
      { timeoutMs: waitTimeoutMs(config.waitTimeout), intervalMs: WAIT_POLL_MS, signal: ctx.signal },
      pause,
    );
    ctx.status(onConfirmed(record));
    return twoOutputs ? [out, null] : out;
  } catch (err) {
    if (!twoOutputs || !isChargingError(err) || err.code !== 'NOT_CONFIRMED') throw err;
    out.outcome = 'not confirmed';
    ctx.status(Status.warn(what === 'START' ? 'startNotConfirmed' : 'stopNotConfirmed'));
    return [null, out];
  }
}

/** A message's own budget (retries, queue, token): a command is answered within this (RetryPolicy.maxTotalMs and a margin). */
const MESSAGE_MS = 35_000;

/**
 * The longest a START or STOP node's operation may take with these settings:
 * the command, then the wait, or each STOP and wait of *make sure it ends*.
 * A fleet's other replicas wait this long for its outcome (send-once.ts).
 */
export function operationMs(config: EnsureConfig): number {
  const waitMs = waitTimeoutMs(config.waitTimeout);
  if (config.ensure) return Math.round(positiveNumber(config.ensureAttempts, DEFAULT_ENSURE_ATTEMPTS, 1, 10)) * (MESSAGE_MS + waitMs);
  return MESSAGE_MS + (config.wait ? waitMs : 0);
}

/** STOPs in all when "Make sure it ends" is on and the field is empty or out of range. */
export const DEFAULT_ENSURE_ATTEMPTS = 3;

/**
 * "Make sure it ends": STOP, wait for the end, STOP again while the session
 * goes on (nodes/lib/session/ensure-stop.ts). Ended → output 1 with
 * msg.outcome "ended" and msg.stopAttempts; not ended → NOT_STOPPED, or output
 * 2 with msg.outcome "not stopped" when that output is enabled.
 */
export async function sendWhenStopped(msg: NodeMessage, payload: Record<string, unknown>, command: ChargingCommand, config: EnsureConfig, ctx: WorkContext): Promise<Outputs> {
  const result = await ensureStop(command, {
    attempts: Math.round(positiveNumber(config.ensureAttempts, DEFAULT_ENSURE_ATTEMPTS, 1, 10)),
    timeoutMs: waitTimeoutMs(config.waitTimeout),
    intervalMs: WAIT_POLL_MS,
    signal: ctx.signal,
    send: (c) => ctx.client.sendCommand(c, { signal: ctx.signal }),
    poll: async (t, signal) => (await ctx.client.getProgress(t, { signal: signal ?? ctx.signal })).record,
    sleep: pause,
    onAttempt: (n, of) => ctx.status(Status.requesting('stoppingAttempt', { n, of })),
    onWaiting: (n, of) => ctx.status(Status.waiting('stoppingAttempt', { n, of })),
  });
  // No STOP accepted but the session ended (every answer was lost): the message carries no status.
  const out: NodeMessage & Record<string, unknown> = result.accepted ? acceptedMessage(msg, payload, result.accepted, 'STOP', ctx) : { ...msg, payload };
  out.outcome = result.outcome;
  out.stopAttempts = result.stopAttempts;
  const last = result.lastActive ? deriveSession(result.lastActive, ctx.service.deriveOptions) : null;
  // Ended: the session's record for the books, as watch mode sends it on "ended" (endedAt: wall time, people read it).
  out.session = last && result.outcome === 'ended' ? { ...last, ...sessionTotals(last, Date.now()) } : last;
  if (result.outcome === 'ended') {
    ctx.status(Status.ok('sessionEnded'));
    return config.timeoutOutput ? [out, null] : out;
  }
  if (!config.timeoutOutput) throw notStopped(result);
  ctx.status(Status.warn('stopNotConfirmed'));
  return [null, out];
}

/**
 * The message a START or STOP sends on: a shallow copy of the input (which stays
 * untouched, so that an error later reports it as it came), with the command in
 * msg.payload (DESIGN §2 "Chaining"), the status and the body. A 2xx other than
 * the spec's 202 is passed on but said once; a body that could not be read is
 * said on msg.responseNote and once in the log.
 */
export function acceptedMessage(
  msg: NodeMessage,
  payload: Record<string, unknown>,
  res: { statusCode: number; body: unknown; bodyNote?: string },
  action: 'START' | 'STOP',
  ctx: WorkContext,
): NodeMessage & { statusCode: number; response: unknown; responseNote?: string; outcome?: string; session?: unknown } {
  const out = { ...msg, payload, statusCode: res.statusCode, response: res.body } as NodeMessage & { statusCode: number; response: unknown; responseNote?: string };
  if (res.statusCode !== 202) {
    ctx.warnOnce(
      `status-${res.statusCode}`,
      `The service answered ${res.statusCode} to ${action}, not 202 (the status the spec defines): passed on as accepted; check msg.statusCode and msg.response in your flow`,
    );
  }
  if (res.bodyNote) {
    out.responseNote = res.bodyNote;
    ctx.warnOnce('body-note', res.bodyNote);
  }
  return out;
}
