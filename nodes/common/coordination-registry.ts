/**
 * A charging-service configuration's Coordination (nodes/lib/coordination):
 * alone, a LocalCoordination; with *Coordinate replicas* (docs/fleet.md), one
 * over the process's Fleet for its Redis and fleet key, shared by
 * every configuration of this process that names the same ones (one process
 * is one replica, however many configurations it has: counting each as a
 * replica halved every share of the rate and listed configurations as
 * replicas), closed when the last of them closes. Each change of Redis's
 * health is said once in the log. nodes/lib/fleet (and with it ioredis) is
 * loaded here only when coordination is set, so that a configuration without
 * it costs nothing at start-up.
 */
import type { Node } from 'node-red';
import type { Coordination } from '../lib/coordination/coordination';
import { LocalCoordination } from '../lib/coordination/local';
import type { Fleet } from '../lib/fleet/fleet';
import type { FleetSettings } from './service-options';

/** A configuration's coordination and how it lets go of it (closing the Fleet with its last user). */
export interface OpenedCoordination {
  coordination: Coordination;
  release(): Promise<void>;
}

interface Shared {
  fleet: Fleet;
  /** the configurations using it, oldest first: the first one speaks for the fleet in the log */
  users: Node[];
}

const shared = new Map<string, Shared>();

/** Alone when `settings` is null; else the coordination over the Fleet for these settings (opened, or the one this process has open). */
export function openCoordination(node: Node, settings: FleetSettings | null): OpenedCoordination {
  if (!settings) return { coordination: new LocalCoordination(), release: () => Promise.resolve() };
  const id = JSON.stringify([settings.fleetKey, settings.url]);
  let entry = shared.get(id);
  if (!entry) {
    const created: Shared = { fleet: create(settings, () => created.users[0]), users: [] };
    entry = created;
    shared.set(id, entry);
  }
  const e = entry;
  e.users.push(node);
  const offHealth = healthLog(e.fleet, () => e.users[0] === node, node);
  let released = false;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { RedisCoordination } = require('../lib/fleet/coordination') as typeof import('../lib/fleet/coordination');
  return {
    coordination: new RedisCoordination(e.fleet),
    release: async () => {
      if (released) return;
      released = true;
      offHealth();
      e.users = e.users.filter((u) => u !== node);
      if (e.users.length > 0) return;
      if (shared.get(id) === e) shared.delete(id);
      await e.fleet.close();
    },
  };
}

function create(settings: FleetSettings, speaker: () => Node | undefined): Fleet {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Fleet: FleetClass } = require('../lib/fleet/fleet') as typeof import('../lib/fleet/fleet');
  return new FleetClass({
    url: settings.url,
    tls: settings.tls,
    fleetKey: settings.fleetKey,
    cycleMs: settings.cycleMs,
    leaseMs: settings.leaseMs,
    onWarning: (text) => speaker()?.warn(text),
    onError: (err) => speaker()?.warn(`Coordinate replicas: ${err.message}`),
  });
}

/** Says each change of Redis's health once: by the configuration that speaks for the fleet. */
function healthLog(fleet: Fleet, speaks: () => boolean, node: Node): () => void {
  let wasDown = false;
  return fleet.onHealth((h) => {
    if (!speaks()) return;
    if (!h.up) {
      wasDown = true;
      node.warn(`Coordinate replicas: ${h.reason ?? 'Redis is unreachable'}; watched sessions this replica owns are left to the others when its leases end, and commands go out without deduplication until Redis answers again`);
    } else if (wasDown) {
      wasDown = false;
      node.log('Coordinate replicas: Redis answers again; coordination resumed');
    }
  });
}
