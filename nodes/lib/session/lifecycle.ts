/**
 * The lifecycle of a watched RFID token as one table: what a new
 * progress answer means, given what the last ones showed. A pure function of
 * the last state and the new sighting, with no schedule, no I/O and no
 * allocation, so that the watcher, a restart (the saved state) and a property
 * test all read a record the same way.
 *
 * | before \ now        | no session | pending         | transaction A        | transaction B        |
 * |---------------------|------------|-----------------|----------------------|----------------------|
 * | nothing seen        | –          | pending         | started A            | started B            |
 * | pending             | ended      | – (same)        | started A            | started B            |
 * | transaction A       | ended A    | ended A, pending| updated if the meter moved | ended A, started B |
 *
 * "No session" reaches this table only once the watcher has confirmed it (a
 * second query: see SessionWatcher.confirmEnd); an answer that could not be
 * read changes nothing and never reaches it. A transaction never goes back to
 * pending (spec §2.2: the transactionId is the session's from the start), so a
 * pending session where transaction A was is a new session on the same token:
 * A ended. Keeping A silently there would let the next poll start B over it,
 * so A would never get its `ended` (and a billing flow would never book it).
 */

/** What decides the next event of a token (the watcher's entry and the saved state both have these fields). */
export interface LifecycleState {
  /** a session (pending or with a transaction) was seen and has not ended */
  seen: boolean;
  /** its transactionId; null while pending (or when nothing is seen) */
  transactionId: string | null;
  /** the last meter reading, null when none */
  meterEnd: number | null;
}

/** One confirmed answer: the session found (pending when transactionId is null), or null for no session. */
export interface Sighting {
  transactionId: string | null;
  meterEnd: number | null;
}

/** What a sighting means: the session seen so far ends, and/or a (new) session begins or moves on. */
export interface Transition {
  /** the session seen so far ended: send `ended` with its last values, before anything else */
  readonly ends: boolean;
  /** the event for the session now seen, if any */
  readonly event: 'pending' | 'started' | 'updated' | null;
}

// The few possible answers, made once: the watcher asks this at every poll.
const NOTHING: Transition = Object.freeze({ ends: false, event: null });
const ENDED: Transition = Object.freeze({ ends: true, event: null });
const PENDING: Transition = Object.freeze({ ends: false, event: 'pending' });
const STARTED: Transition = Object.freeze({ ends: false, event: 'started' });
const UPDATED: Transition = Object.freeze({ ends: false, event: 'updated' });
const ENDED_PENDING: Transition = Object.freeze({ ends: true, event: 'pending' });
const ENDED_STARTED: Transition = Object.freeze({ ends: true, event: 'started' });

/** The table above. `now` null: no session (confirmed). */
export function transition(before: LifecycleState, now: Sighting | null): Transition {
  if (now === null) return before.seen ? ENDED : NOTHING;
  const tx = now.transactionId;
  if (!before.seen) return tx === null ? PENDING : STARTED;
  if (before.transactionId === null) return tx === null ? NOTHING : STARTED;
  // A transaction was seen.
  if (tx === null) return ENDED_PENDING;
  if (tx !== before.transactionId) return ENDED_STARTED;
  return now.meterEnd !== null && now.meterEnd !== before.meterEnd ? UPDATED : NOTHING;
}
