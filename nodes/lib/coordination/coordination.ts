/**
 * The one seam between the nodes and *Coordinate replicas* (docs/fleet.md,
 * docs/architecture.md). A configuration node hands every node using it a
 * Coordination: LocalCoordination (local.ts) when the process is alone, the
 * Redis one (nodes/lib/fleet/coordination.ts) when replicas share the work.
 * A node never asks which it has.
 *
 * The seam is a few primitives, each with a local default and its
 * Redis-away behaviour in its result type; what a node needs is built on
 * them in its own domain folder (session/send-once-key, session/watch-share,
 * control/control-share, the depot, the ledger):
 *
 * - claims: work done once per key by the fleet, its outcome for the others
 * - leases: which process acts on which item of a list, its state committed
 *   exactly once, messages for the holder
 * - grants: a counting semaphore with a priority queue held by keys (a depot)
 * - reach: how this process's queries of the service end, compared with its peers'
 * - clientHooks: the token and request budget the ServiceClient shares
 *
 * And what an operator's dashboard reads of it (`figures`, read-only).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { ControlTarget } from '../control/view';
import type { Claims } from './claims';
import type { Leases } from './leases';
import type { ServiceReachShare } from './reach';
import type { Grants } from './grants';

/** How a share speaks through its node: a warning once per key, an error for Catch. */
export interface ShareVoice {
  warnOnce(key: string, text: string): void;
  report(err: unknown, about?: { topic: string; target?: ControlTarget }): void;
}

/**
 * What a scrape of the metrics reads of the coordination (plain numbers, read
 * when asked, never computed per request). Alone: nothing (no replica
 * figures exist). A figure that cannot be read now is left out, not made up.
 */
export interface CoordinationFigures {
  /** leases this replica holds for the watch and control nodes of this configuration */
  leasesHeld?: number;
  /** live replicas at the last heartbeat, this one included */
  replicas?: number;
  /** whether Redis answers this replica */
  redisUp?: boolean;
  /** the round trip of this replica's last heartbeat to Redis, while Redis answers */
  redisRoundTripSeconds?: number;
  /** times a watch node of this configuration gave its share away (the service unreachable from here) */
  standDowns?: number;
}

export interface Coordination {
  /** work done once per key by the fleet (claims.ts); alone, at once */
  readonly claims: Claims;
  /** lists whose items one process acts on at a time (leases.ts); alone, every item here */
  readonly leases: Leases;
  /** counting semaphores with a priority queue, held by keys (grants.ts: a depot's slots); alone, kept in the caller's store */
  readonly grants: Grants;
  /** how this process's queries of the service end, compared with its peers' (reach.ts); alone, nothing */
  readonly reach: ServiceReachShare;
  /** what the ServiceClient shares: the token and the request budget (alone: nothing) */
  clientHooks(): FleetHooks | undefined;
  /** the figures for the metrics, read at a scrape (alone: none) */
  figures(): CoordinationFigures;
}
