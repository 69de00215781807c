/**
 * A watched token's state as the fleet keeps it in Redis (ownership.ts, the
 * COMMIT_STATE script): "<rev>:<ids>:<JSON>", ids being the last commit ids
 * applied (so that a retry of one of them is known as done).
 */

/** A token's state as kept in Redis: its revision, and the state (null: no session, after an end). */
export interface SavedEntry<S> {
  rev: number;
  state: S | null;
}

/**
 * "<rev>:<ids>:<JSON>" (JSON empty: no session) -> SavedEntry; null when absent. A
 * state that cannot be read keeps its revision (so that the next commit can
 * replace it) and counts as no session.
 */
export function parseSaved<S>(raw: string | null | undefined): SavedEntry<S> | null {
  if (typeof raw !== 'string') return null;
  const colon = raw.indexOf(':');
  const rev = Number(raw.slice(0, colon));
  if (colon < 1 || !Number.isInteger(rev)) return null;
  // "<rev>:<ids>:<JSON>"; "<rev>:<JSON>" as kept before commits had ids (JSON starts with '{' or is empty).
  const ids = COMMIT_IDS.exec(raw.slice(colon + 1, colon + 1 + 8 * 17 + 1));
  const json = raw.slice(colon + 1 + (ids ? ids[0].length : 0));
  if (json === '') return { rev, state: null };
  try {
    return { rev, state: JSON.parse(json) as S };
  } catch {
    return { rev, state: null };
  }
}

/** The commit ids kept before the state: up to 8 of 16 hex digits, comma-separated, and the colon. */
const COMMIT_IDS = /^[0-9a-f]{16}(?:,[0-9a-f]{16}){0,7}:/;
