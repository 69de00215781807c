/**
 * Coordination through Redis (docs/fleet.md): the Coordination a
 * configuration node hands its nodes when *Coordinate replicas* is set. Each
 * primitive is one piece of the Fleet: claims (claims/), leases (leases/),
 * reach (membership/service-reach.ts), and the client's shared token and
 * budget (Fleet.clientHooks).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { Claims } from '../coordination/claims';
import type { Coordination, CoordinationFigures } from '../coordination/coordination';
import type { Grants } from '../coordination/grants';
import type { Leases } from '../coordination/leases';
import type { ServiceReachShare } from '../coordination/reach';
import type { Fleet } from './fleet';

export class RedisCoordination implements Coordination {
  readonly claims: Claims;
  readonly leases: Leases;
  readonly reach: ServiceReachShare;
  readonly grants: Grants;
  /** the fleet's scopes this configuration's nodes opened (a watch node's id; control:<id>): its leases are counted there */
  private readonly scopes = new Set<string>();

  constructor(readonly fleet: Fleet) {
    this.claims = fleet.claims;
    // The scopes this configuration's nodes open, so that its figures count their leases alone.
    this.leases = {
      lapses: true,
      open: (name, options) => {
        this.scopes.add(name);
        return fleet.leases.open(name, options);
      },
    };
    this.reach = fleet.reach;
    // A depot's pool is the fleet's, in Redis: the node's own store is not used.
    this.grants = { open: (pool) => fleet.grantPool(pool) };
  }

  clientHooks(): FleetHooks {
    return this.fleet.clientHooks();
  }

  /** Read from what the fleet keeps anyway: its health, the leases of this configuration's scopes, the replicas, the last heartbeat. */
  figures(): CoordinationFigures {
    const up = this.fleet.health.up;
    const rtt = this.fleet.roundTripMs;
    return {
      leasesHeld: this.fleet.leasesHeld(this.scopes),
      replicas: this.fleet.replicas().length,
      redisUp: up,
      ...(up && rtt !== null ? { redisRoundTripSeconds: rtt / 1000 } : {}),
      standDowns: this.fleet.reach.standDowns,
    };
  }
}
