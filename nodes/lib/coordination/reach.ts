/**
 * Can this process reach the service? The nodes tell their coordination how
 * each query of the service ended, and lend it a query to probe with. Alone
 * (noReach) nothing is done with it. With replicas the fleet compares this
 * replica's answers with its peers' (nodes/lib/fleet/service-reach.ts): one
 * that gets no answers where its peers do gives its watched tokens and
 * control targets to them, and leaves its commands to them, until a probe
 * gets through.
 */
import type { ChargingError } from '../errors';

export interface ServiceReachShare {
  /** how one query of the service ended here: answered (null), or why not */
  polled(err: ChargingError | null): void;
  /** a query this process can make while it has given its share away; returns how to withdraw it */
  probeWith(probe: () => Promise<unknown>): () => void;
}

/** A process alone: nobody to compare with, nothing to give away. */
export const noReach: ServiceReachShare = {
  polled: () => undefined,
  probeWith: () => () => undefined,
};

/**
 * How a node tells its queries' ends to its coordination, and lends the last
 * thing it queried (a token, a target) as the probe: `polled` after each
 * query, `withdraw` when the node closes.
 */
export function reachReporter<K>(reach: ServiceReachShare, query: (what: K) => Promise<unknown>): { polled(what: K, err: ChargingError | null): void; withdraw(): void } {
  let last: { what: K } | null = null;
  const withdraw = reach.probeWith(() => (last === null ? Promise.resolve() : query(last.what)));
  return {
    polled: (what, err) => {
      last = { what };
      reach.polled(err);
    },
    withdraw,
  };
}
