/**
 * An item's committed state as a lease scope keeps it in Redis, one codec for
 * TypeScript and for the Lua scripts that read and write it (STATE_CODEC_LUA,
 * included by COMMIT_STATE and RESTORE_STATES):
 *
 *     "<rev>:<ids>:<JSON>"
 *
 * `rev` a revision that only grows, `ids` the last commit ids applied (up to
 * 8 of 16 hex digits, comma-separated, possibly none: a state put back after
 * a loss), so that a retry of one of them is known as done; JSON empty: no
 * session (a tombstone that keeps the revision). "<rev>:<JSON>", as kept
 * before commits had ids, is still read (JSON then starts with '{' or is empty).
 */

/** An item's state as kept in Redis: its revision, and the state (null: none, after an end). */
export interface SavedEntry<S> {
  rev: number;
  state: S | null;
}

/** How many commit ids a state keeps: a retry older than this many commits is no longer recognised. */
export const KEPT_COMMIT_IDS = 8;

/** "<rev>:" then either "<ids>:" (hex and commas) or the old format's JSON. Linear: no nested repetition. */
const HEAD = /^(\d+):(?:([0-9a-f,]*):)?/;

/** "<rev>:<ids>:<JSON>" -> SavedEntry; null when absent. A state that cannot be read keeps its revision and counts as none. */
export function decodeState<S>(raw: string | null | undefined): SavedEntry<S> | null {
  if (typeof raw !== 'string') return null;
  const head = HEAD.exec(raw.slice(0, 32 + KEPT_COMMIT_IDS * 17));
  if (!head) return null;
  const rev = Number(head[1]);
  const json = raw.slice(head[0].length);
  if (json === '') return { rev, state: null };
  try {
    return { rev, state: JSON.parse(json) as S };
  } catch {
    return { rev, state: null };
  }
}

/** The text RESTORE_STATES and COMMIT_STATE write (the Lua's encodeState does the same). */
export function encodeState(rev: number, ids: string[], state: unknown): string {
  return `${rev}:${ids.join(',')}:${state === null || state === undefined ? '' : JSON.stringify(state)}`;
}

/**
 * The same codec in Lua: decodeState(cur) -> rev, ids, json (rev -1 when
 * absent), and encodeState(rev, ids, json).
 */
export const STATE_CODEC_LUA = `
local function decodeState(cur)
  if not cur then return -1, '', '' end
  local rev, rest = string.match(cur, '^(%d+):(.*)$')
  if not rev then return 0, '', '' end
  local ids, json = string.match(rest, '^([%x,]*):(.*)$')
  if not ids then ids, json = '', rest end
  return tonumber(rev), ids, json
end
local function encodeState(rev, ids, json)
  return string.format('%.0f', rev) .. ':' .. ids .. ':' .. json
end`;
