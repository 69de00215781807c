/** The "wait until started / ended" option shared by charging-start and charging-stop. */
import type { ServiceClient } from '../lib/service-client';
import { sleep } from '../lib/concurrency-limiter';
import { waitForSession } from '../lib/session-watcher';
import type { ProgressRecord } from '../lib/session';
import { positiveNumber } from '../lib/config';
import { isChargingError } from '../lib/errors';
import { Status, NodeStatus } from '../lib/status';
import type { NodeMessage } from 'node-red';
import type { WorkContext, Outputs } from './node-support';

export interface WaitConfig {
  /** wait after the 202 until progress confirms */
  wait?: boolean;
  /** seconds */
  waitTimeout?: string | number;
  /** send to a second output on timeout instead of raising an error */
  timeoutOutput?: boolean;
}

/** Seconds between polls while waiting: often enough to feel immediate, rarely enough to be harmless. */
export const WAIT_POLL_MS = 1_000;

export function waitTimeoutMs(config: WaitConfig): number {
  return positiveNumber(config.waitTimeout, 60, 1, 3600) * 1000;
}

export function waitFor(
  client: ServiceClient,
  token: string,
  want: (r: ProgressRecord | null) => boolean,
  what: string,
  config: WaitConfig,
  signal: AbortSignal,
): Promise<ProgressRecord | null> {
  return waitForSession(
    async (t) => (await client.getProgress(t, { signal })).record,
    token,
    want,
    what,
    { timeoutMs: waitTimeoutMs(config), intervalMs: WAIT_POLL_MS, signal },
    sleep,
  );
}

export const hasTransaction = (r: ProgressRecord | null): boolean =>
  r !== null && typeof r.transactionData === 'object' && r.transactionData !== null && typeof r.transactionData.transactionId === 'string' && r.transactionData.transactionId !== '';

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
  ctx.setStatus(Status.waiting(`accepted, waiting for ${what === 'START' ? 'start' : 'end'}…`));
  try {
    const record = await waitFor(ctx.client, token, want, what, config, ctx.signal);
    ctx.setStatus(onConfirmed(record));
    return twoOutputs ? [out, null] : out;
  } catch (err) {
    if (!twoOutputs || !isChargingError(err) || err.code !== 'NOT_CONFIRMED') throw err;
    out.outcome = 'not confirmed';
    ctx.setStatus(Status.warn(`${what.toLowerCase()} not confirmed`));
    return [null, out];
  }
}
