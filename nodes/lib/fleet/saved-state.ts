/**
 * A watched token's state as the fleet keeps it in Redis (ownership.ts, the
 * COMMIT_STATE script): "<rev>:<commit id>:<JSON>", the commit id being the
 * one that wrote it (so that a retry of that commit is known as done).
 */

/** A token's state as kept in Redis: its revision, and the state (null: no session, after an end). */
export interface SavedEntry<S> {
  rev: number;
  state: S | null;
}

/**
 * "<rev>:<commit id>:<JSON>" (JSON empty: no session) -> SavedEntry; null when absent. A
 * state that cannot be read keeps its revision (so that the next commit can
 * replace it) and counts as no session.
 */
export function parseSaved<S>(raw: string | null | undefined): SavedEntry<S> | null {
  if (typeof raw !== 'string') return null;
  const colon = raw.indexOf(':');
  const rev = Number(raw.slice(0, colon));
  if (colon < 1 || !Number.isInteger(rev)) return null;
  // "<rev>:<commit id>:<JSON>"; "<rev>:<JSON>" as kept before commits had ids.
  const json = COMMIT_ID.test(raw.slice(colon + 1, colon + 18)) ? raw.slice(colon + 18) : raw.slice(colon + 1);
  if (json === '') return { rev, state: null };
  try {
    return { rev, state: JSON.parse(json) as S };
  } catch {
    return { rev, state: null };
  }
}

/** A commit id as kept before the state: 16 hex digits and the colon. */
const COMMIT_ID = /^[0-9a-f]{16}:$/;
