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

export class LocalCoordination implements Coordination {
  readonly claims = localClaims;
  readonly leases = localLeases;
  readonly reach = noReach;

  clientHooks(): FleetHooks | undefined {
    return undefined;
  }

  /** A process alone has no replica figures. */
  figures(): CoordinationFigures {
    return {};
  }
}
