/**
 * Coordination through Redis (docs/fleet.md): the Coordination a
 * configuration node hands its nodes when *Coordinate replicas* is set. Each
 * primitive is one piece of the Fleet: claims (claims/), leases (leases/),
 * reach (membership/service-reach.ts), and the client's shared token and
 * budget (Fleet.clientHooks).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { Claims } from '../coordination/claims';
import type { Coordination } from '../coordination/coordination';
import type { Leases } from '../coordination/leases';
import type { ServiceReachShare } from '../coordination/reach';
import type { Fleet } from './fleet';

export class RedisCoordination implements Coordination {
  readonly claims: Claims;
  readonly leases: Leases;
  readonly reach: ServiceReachShare;

  constructor(readonly fleet: Fleet) {
    this.claims = fleet.claims;
    this.leases = fleet.leases;
    this.reach = fleet.reach;
  }

  clientHooks(): FleetHooks {
    return this.fleet.clientHooks();
  }
}
