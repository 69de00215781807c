/**
 * What a replica says about itself at each heartbeat (`replicas:info`), read
 * back: by the Fleet, and by Test connection, which reads Redis without
 * loading the Fleet. No Redis client in here.
 */

/** A live replica, as it describes itself at each heartbeat. */
export interface ReplicaInfo {
  id: string;
  host?: string;
  pid?: number;
  /** epoch ms */
  startedAt?: number;
  /** tokens it owns, over all its watch scopes */
  owned?: number;
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
      owned: typeof v.owned === 'number' ? v.owned : undefined,
    };
  } catch {
    return {};
  }
}
