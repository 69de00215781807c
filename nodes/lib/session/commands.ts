import type { ClaimPolicy } from '../coordination/claims';

/** The command object of spec §2.1, as sent in the body of POST /poi/v1/charging-sessions. */
export interface ChargingCommand {
  action: 'START' | 'STOP';
  locationId: string;
  /** always a string in a command, although the record carries a number (spec §2.1, §2.2) */
  evseId: string;
  token: string;
  /** STOP only; never sent with START */
  transactionId?: string;
}

export interface StartFields {
  locationId: string;
  evseId: string;
  token: string;
}

export interface StopFields extends StartFields {
  transactionId: string;
}

/** Spec §4.1: START sends locationId, evseId and token, and never transactionId. Key order as the spec lists the fields. */
export function startCommand(f: StartFields): ChargingCommand {
  return { action: 'START', locationId: f.locationId, evseId: String(f.evseId), token: f.token };
}

/** Spec §4.1: STOP sends the same fields as START plus the transactionId from the progress query. */
export function stopCommand(f: StopFields): ChargingCommand {
  return { action: 'STOP', locationId: f.locationId, evseId: String(f.evseId), token: f.token, transactionId: f.transactionId };
}

/**
 * The same START or STOP produced on several replicas (an inject on each) is
 * sent once (docs/fleet.md, "Claims"): a command is "the same" when its
 * action, token, location and connector are.
 */
export function commandClaimKey(cmd: ChargingCommand): string[] {
  return [cmd.action, cmd.token, cmd.locationId, String(cmd.evseId)];
}

/**
 * A command's claim outlives the whole operation (`longestMs`: the command,
 * and the wait or *make sure it ends* that follows it), and the others wait as
 * long for its outcome. A STOP whose claimer died is taken over by a replica
 * that was given it too (twice is harmless, never is not); a START is not.
 */
export function commandClaimPolicy(cmd: ChargingCommand, longestMs: number): ClaimPolicy {
  return { workMs: longestMs, takeOver: cmd.action === 'STOP' ? 'when-claimer-gone' : 'never' };
}
