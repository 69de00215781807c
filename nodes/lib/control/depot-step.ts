/**
 * Where a check of charging-control meets its depot (ControlDeps.depot): what
 * of the target counts, what the depot is told about it, and the depot's word
 * taken into memory. The depot's own rules are in nodes/lib/depot.
 */
import type { DepotWord, HoldFacts } from '../depot/link';
import type { ControlMemory } from './memory';
import type { Decision } from './reconcile';
import type { ProgressView } from './view';

/** The target counts in its depot: a session (pending or active), or a START of ours that may still bring one. */
export function counts(view: ProgressView, m: ControlMemory): boolean {
  return view.kind === 'active' || view.kind === 'pending' || (view.kind === 'none' && m.command?.action === 'START');
}

/** What the depot's table says of a target that counts. */
export function holdFacts(view: ProgressView, m: ControlMemory): HoldFacts {
  const active = view.kind === 'active';
  const stopping = m.command?.action === 'STOP' || m.yielding !== null || (m.done !== null && active && m.done.transactionId === view.transactionId);
  const yieldingKind = m.yielding?.kind ?? (m.done?.byDepot && active && m.done.transactionId === view.transactionId ? 'idle' : null);
  return {
    transactionId: active ? view.transactionId : null,
    ...(active && view.energyKWh !== undefined ? { energyKWh: view.energyKWh } : {}),
    state: stopping ? 'stopping' : active ? 'charging' : 'starting',
    priority: m.priority,
    yielding: yieldingKind,
    session: view.kind === 'active' || view.kind === 'pending',
  };
}

/**
 * The depot says the session must stop: a full car is done (not started
 * again until a new wish), a turn, a shed or a higher priority stops it and
 * it queues again while on is wanted. Only an active session of ours that
 * on is wanted for, once.
 */
export function takeYield(m: ControlMemory, word: DepotWord | null, view: ProgressView): void {
  const y = word?.yield;
  if (!y || view.kind !== 'active' || m.wanted !== true || m.done || m.yielding) return;
  if (y.kind === 'idle') m.done = { reason: y.reason, transactionId: view.transactionId, byDepot: true };
  else m.yielding = { transactionId: view.transactionId, reason: y.reason, kind: y.kind };
}

/** A START the depot did not grant: queued, with why; nothing is sent and no attempt is used. */
export function queued(word: DepotWord, checkMs: number): Decision {
  return { state: 'queued', reason: word.reason ?? 'waiting for a slot', nextMs: checkMs };
}
