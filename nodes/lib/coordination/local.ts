/**
 * A process alone (no *Coordinate replicas*): work claimed runs at once,
 * every item of a list is this process's, nothing is compared with peers.
 * Nothing here waits, and nothing is loaded for it.
 */
import type { FleetHooks } from '../client/fleet-hooks';
import { localClaims } from './claims';
import type { Coordination, CoordinationFigures } from './coordination';
import { localLeases } from './leases';
import { noReach } from './reach';
import { LocalGrantPool } from './grant-pool';
import type { GrantPool, Grants, GrantStore } from './grants';

export class LocalCoordination implements Coordination {
  readonly claims = localClaims;
  readonly leases = localLeases;
  readonly grants = localGrants();
  readonly reach = noReach;

  clientHooks(): FleetHooks | undefined {
    return undefined;
  }

  /** A process alone has no replica figures. */
  figures(): CoordinationFigures {
    return {};
  }
}

/** The grants of a process alone: one LocalGrantPool per name, kept in the store its first caller gives. */
function localGrants(): Grants {
  const pools = new Map<string, LocalGrantPool>();
  return {
    open(pool: string, local: GrantStore): GrantPool {
      let p = pools.get(pool);
      if (!p) pools.set(pool, (p = new LocalGrantPool({ store: local })));
      return p;
    },
  };
}
