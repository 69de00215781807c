import type { NodeAPI, Node, NodeDef } from 'node-red';
import { evaluateFields, runNode, typedField, WorkContext } from './common/node-support';
import { WaitConfig, sendWhenConfirmed } from './common/waits';
import { resolveFields, stopCommand, normaliseField, NodeFields, ProgressRecord } from './lib/session';
import { Status } from './lib/status';
import { ChargingError, isChargingError } from './lib/errors';

interface StopConfig extends NodeDef, WaitConfig {
  service: string;
}

export = function register(RED: NodeAPI): void {
  function ChargingStop(this: Node, config: StopConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    const raw = config as unknown as Record<string, unknown>;
    const fields = {
      locationId: typedField(raw, 'locationId'),
      evseId: typedField(raw, 'evseId'),
      token: typedField(raw, 'token'),
      transactionId: typedField(raw, 'transactionId'),
    };

    runNode(RED, node, config.service, async (msg, ctx) => {
      const set = await evaluateFields(RED, node, fields, msg);
      const { fields: f, record } = await stopFields(set, msg.payload, ctx);
      const command = stopCommand(f);
      ctx.setStatus(Status.requesting('stopping'));
      const res = await ctx.client.stopSession(command, { signal: ctx.signal });
      const out = msg as typeof msg & { statusCode?: number; response?: unknown; outcome?: string };
      out.payload = { ...command, ...cdrIdOf(record ?? msg.payload) };
      out.statusCode = res.statusCode;
      out.response = res.body;
      if (!config.wait) {
        ctx.setStatus(Status.ok(`stop accepted`));
        return out;
      }
      const ended = (r: ProgressRecord | null) => r === null || r.transactionData?.transactionId !== command.transactionId;
      return sendWhenConfirmed(out, command.token, ended, 'STOP', config, ctx, () => {
        out.outcome = 'ended';
        return Status.ok('session ended');
      });
    });
  }
  RED.nodes.registerType('charging-stop', ChargingStop);
};

/**
 * The STOP fields. Without a transactionId (in the node or msg.payload), the
 * session is looked up by its token with a progress query, which also supplies
 * locationId and evseId when they are missing.
 */
async function stopFields(set: NodeFields, payload: unknown, ctx: WorkContext): Promise<{ fields: { locationId: string; evseId: string; token: string; transactionId: string }; record: ProgressRecord | null }> {
  try {
    return { fields: resolveFields(['locationId', 'evseId', 'token', 'transactionId'] as const, set, payload), record: null };
  } catch (err) {
    if (!isChargingError(err) || err.code !== 'MISSING_FIELD' || err.field === 'token') throw err;
  }
  const { token } = resolveFields(['token'] as const, set, payload);
  ctx.setStatus(Status.requesting('looking up session'));
  const { record } = await ctx.client.getProgress(token, { signal: ctx.signal });
  if (record === null) throw new ChargingError('NO_SESSION', `Nothing to stop: there is no session for token ${token}`, { field: 'transactionId' });
  const transactionId = record.transactionData?.transactionId;
  if (typeof transactionId !== 'string' || transactionId === '') {
    throw new ChargingError('NO_SESSION', `Cannot stop yet: the session for token ${token} has not started (no transactionId in its progress record)`, { field: 'transactionId' });
  }
  // Values given by the user win; the record fills the gaps.
  const merged = resolveFields(['locationId', 'evseId'] as const, set, { ...pick(record), ...pick(payload) });
  return { fields: { ...merged, token, transactionId: normaliseField('transactionId', transactionId, 'the progress record') }, record };
}

function pick(p: unknown): Record<string, unknown> {
  if (!p || typeof p !== 'object') return {};
  const o = p as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of ['locationId', 'evseId']) if (Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined && o[k] !== null && o[k] !== '') out[k] = o[k];
  return out;
}

/** Keep the billing id when the input was a progress record: billing needs it after STOP. */
function cdrIdOf(payload: unknown): { cdrId?: string } {
  if (!payload || typeof payload !== 'object') return {};
  const td = Object.prototype.hasOwnProperty.call(payload, 'transactionData') ? (payload as { transactionData?: unknown }).transactionData : undefined;
  if (!td || typeof td !== 'object' || !Object.prototype.hasOwnProperty.call(td, 'cdrId')) return {};
  const cdrId = (td as { cdrId?: unknown }).cdrId;
  return typeof cdrId === 'string' && cdrId !== '' ? { cdrId } : {};
}
