/**
 * A charging-service configuration's side of *Coordinate replicas*
 * (docs/fleet.md): opens its Fleet, says each change of Redis's health once in
 * the log, and closes it. nodes/lib/fleet (and with it ioredis) is loaded here
 * only when coordination is set, so that a configuration without it costs
 * nothing at start-up.
 */
import type { Node } from 'node-red';
import type { Fleet } from '../lib/fleet/fleet';
import type { FleetSettings } from './service-options';

export function openFleet(node: Node, settings: FleetSettings): Fleet {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Fleet: FleetClass } = require('../lib/fleet/fleet') as typeof import('../lib/fleet/fleet');
  const fleet = new FleetClass({
    url: settings.url,
    tls: settings.tls,
    fleetKey: settings.fleetKey,
    cycleMs: settings.cycleMs,
    leaseMs: settings.leaseMs,
    onWarning: (text) => node.warn(text),
    onError: (err) => node.warn(`Coordinate replicas: ${err.message}`),
  });
  let wasDown = false;
  fleet.onHealth((h) => {
    if (!h.up) {
      wasDown = true;
      node.warn(`Coordinate replicas: ${h.reason ?? 'Redis is unreachable'}; watched sessions this replica owns are left to the others when its leases end, and commands go out without deduplication until Redis answers again`);
    } else if (wasDown) {
      wasDown = false;
      node.log('Coordinate replicas: Redis answers again; coordination resumed');
    }
  });
  return fleet;
}
