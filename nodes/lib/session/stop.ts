/**
 * What a STOP needs (DESIGN §2 "Chaining"): the fields from the node or
 * msg.payload, or, without a transactionId, looked up by token with a progress
 * query, which also supplies locationId and evseId when they are missing.
 */
import { ChargingError, isChargingError } from '../errors';
import { ChargingCommand, stopCommand } from './commands';
import { NodeFields, normaliseField, placeOf, resolveFields } from './inputs';
import { cdrIdOf, ProgressRecord, transactionIdOf } from './record';

export interface ResolvedStop {
  command: ChargingCommand;
  /** the billing id, when the input was a record or the session was looked up: billing needs it after STOP */
  cdrId: string | null;
}

/** Looks a session up by token (a progress query); null when there is none. */
export type SessionLookup = (token: string) => Promise<ProgressRecord | null>;

export async function resolveStop(set: NodeFields, payload: unknown, lookup: SessionLookup, onLookup?: () => void): Promise<ResolvedStop> {
  try {
    const fields = resolveFields(['locationId', 'evseId', 'token', 'transactionId'] as const, set, payload);
    return { command: stopCommand(fields), cdrId: cdrIdOf(payload) };
  } catch (err) {
    if (!isChargingError(err) || err.code !== 'MISSING_FIELD' || err.field === 'token') throw err;
  }
  const { token } = resolveFields(['token'] as const, set, payload);
  onLookup?.();
  const record = await lookup(token);
  if (record === null) throw new ChargingError('NO_SESSION', `Nothing to stop: there is no session for token ${token}`, { field: 'transactionId' });
  const transactionId = transactionIdOf(record);
  if (transactionId === null) {
    throw new ChargingError('NO_SESSION', `Cannot stop yet: the session for token ${token} has not started (no transactionId in its progress record)`, { field: 'transactionId' });
  }
  // Values given by the user win; the record fills the gaps.
  const place = resolveFields(['locationId', 'evseId'] as const, set, { ...placeOf(record), ...placeOf(payload) });
  const command = stopCommand({ ...place, token, transactionId: normaliseField('transactionId', transactionId, 'the progress record') });
  return { command, cdrId: cdrIdOf(record) };
}
