/**
 * What a replica says about itself at each heartbeat (`replicas:info`), read
 * back: by the Fleet, and by Test connection, which reads Redis without
 * loading the Fleet. No Redis client in here.
 */

import type { Reach } from './service-reach';

/** A live replica, as it describes itself at each heartbeat. */
export interface ReplicaInfo {
  id: string;
  host?: string;
  pid?: number;
  /** epoch ms */
  startedAt?: number;
  /** Redis's time (ms) of its last heartbeat: when it said what follows */
  at?: number;
  /** tokens it owns, over all its watch scopes */
  owned?: number;
  /** how its queries of the service went (service-reach.ts) */
  reach?: Reach;
}

/** A `replicas:info` value; an empty or damaged one says nothing. */
export function parseReplicaInfo(raw: unknown): Omit<ReplicaInfo, 'id'> {
  if (typeof raw !== 'string' || raw === '') return {};
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    return {
      host: typeof v.host === 'string' ? v.host : undefined,
      pid: typeof v.pid === 'number' ? v.pid : undefined,
      startedAt: typeof v.startedAt === 'number' ? v.startedAt : undefined,
      at: typeof v.at === 'number' ? v.at : undefined,
      owned: typeof v.owned === 'number' ? v.owned : undefined,
      reach: parseReach(v.reach),
    };
  } catch {
    return {};
  }
}

function parseReach(raw: unknown): Reach | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.fails !== 'number' || !(r.okAgoMs === null || typeof r.okAgoMs === 'number')) return undefined;
  return { fails: r.fails, okAgoMs: r.okAgoMs };
}
