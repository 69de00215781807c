/**
 * What a watch scope's ownership (ownership.ts) tells its caller and needs
 * from its fleet: gains and losses of tokens, a commit's result, the options.
 */
import type { ChargingError } from '../errors';
import type { FleetConnection } from './connection';
import type { SavedEntry } from './saved-state';

export interface AcquiredToken<S> {
  token: string;
  /** what Redis holds for it; null when Redis holds nothing (never reported, or Redis lost its data) */
  saved: SavedEntry<S> | null;
}

/** 'restored': released and acquired again in the same change, from a newer state put back after a loss */
export type ReleaseReason = 'rebalanced' | 'unwatched' | 'lease-lost' | 'closed' | 'restored';

export interface ReleasedToken {
  token: string;
  reason: ReleaseReason;
  /** e.g. "lease lost at 2026-11-25T10:00:00.000Z (Redis unreachable)" */
  message: string;
}

export interface OwnershipChange<S> {
  /** tokens this replica polls from now on, with the state to resume from */
  acquired: AcquiredToken<S>[];
  /** tokens this replica must stop polling (already stopped: mayPoll says false) */
  released: ReleasedToken[];
}

export type CommitResult = { ok: true; rev: number } | { ok: false; reason: 'not-owner' | 'stale' | 'unavailable'; message: string };

export interface OwnershipOptions<S> {
  /** told synchronously about tokens gained and lost; a listener that throws is reported to onError */
  onChange?: (change: OwnershipChange<S>) => void;
  onError?: (err: ChargingError) => void;
}

/** What a scope needs from its fleet. */
export interface ScopeContext {
  connection: FleetConnection;
  replicaId: string;
  leaseMs: number;
  cycleMs: number;
  /** asks the fleet for a cycle soon (after a change of the watch list) */
  kick(): void;
  now?: () => number;
}
