/**
 * The same START or STOP sent once by a fleet of replicas (docs/fleet.md
 * "Command dedup"). An inject or a schedule fires on every
 * replica at once: the replica that claims the command in Redis runs the
 * node's whole operation (the command, and the wait or *make sure it ends*
 * that follows it), and publishes what its flow got; every other replica
 * sends nothing and passes on that outcome, marked:
 *
 *   msg.fleet = { role: 'duplicate', sentBy: '<replica id>' }   (the sender's msg: { role: 'sent', replica })
 *
 * An error of the sender reaches the duplicates' Catch as the same error,
 * naming the replica. No outcome in time (the sender stopped, Redis went away
 * while waiting): OUTCOME_UNKNOWN, never a resend from here. Redis unreachable
 * when claiming: the command goes out without deduplication, with a warning.
 * Alone (LocalCoordination) this is the operation itself, nothing more.
 */
import type { NodeMessage } from 'node-red';
import { commandClaimKey, commandClaimPolicy, type ChargingCommand } from '../lib/session/commands';
import { ChargingError } from '../lib/errors';
import type { Outputs, WorkContext } from './node-lifecycle';
import { Status } from './status';

/** What a duplicate takes from the sender's message: the result, never the input (each replica has its own). */
const RESULT_KEYS = ['payload', 'statusCode', 'response', 'responseNote', 'outcome', 'session', 'stopAttempts'] as const;

type Fields = Record<string, unknown>;
/** The sender's outputs as plain JSON: one message, or one per output (null: nothing on it). */
type Published = Fields | Array<Fields | null> | null;

/** A whole operation may wait for the command's effect (minutes with *make sure it ends*): the claim outlives it. */
export async function sendOnce(ctx: WorkContext, msg: NodeMessage, command: ChargingCommand, longestMs: number, operation: () => Promise<Outputs>): Promise<Outputs> {
  let outputs: Outputs = null;
  const run = await ctx.service.getCoordination().claims.run<Published>(
    commandClaimKey(command),
    async () => {
      outputs = await operation();
      return publishable(outputs);
    },
    commandClaimPolicy(command, longestMs),
    (err) => ctx.warnOnce('fleet-dedup', `Coordinate replicas: ${command.action} sent without deduplication (${err.message}); another replica may send it too`),
  );
  if (run.role === 'ran') {
    if (run.by) mark(outputs, { role: 'sent', replica: run.by });
    return outputs;
  }
  if (run.role === 'unknown') {
    throw new ChargingError('OUTCOME_UNKNOWN', `${command.action} for ${command.token} was not sent here: ${run.message}. Check the session's progress before sending it again`, { outcomeUnknown: true });
  }
  const note = ` (${command.action} sent by replica ${run.from})`;
  if (!run.outcome.ok) throw ChargingError.fromJSON(run.outcome.error, note);
  ctx.status(Status.ok('sentByReplica'));
  const out = rebuild(msg, run.outcome.result);
  mark(out, { role: 'duplicate', sentBy: run.from });
  return out;
}

function publishable(outputs: Outputs): Published {
  const pick = (m: NodeMessage | null): Fields | null => {
    if (!m) return null;
    const f: Fields = {};
    for (const k of RESULT_KEYS) if ((m as Fields)[k] !== undefined) f[k] = (m as Fields)[k];
    return f;
  };
  return Array.isArray(outputs) ? outputs.map(pick) : pick(outputs);
}

function rebuild(msg: NodeMessage, published: Published): Outputs {
  const one = (f: Fields | null): NodeMessage | null => (f ? ({ ...msg, ...f } as NodeMessage) : null);
  return Array.isArray(published) ? published.map(one) : one(published);
}

function mark(outputs: Outputs, fleet: Record<string, string>): void {
  for (const m of Array.isArray(outputs) ? outputs : [outputs]) if (m) (m as Fields).fleet = fleet;
}
