/** How the action nodes find their charging-service configuration. */
import type { Node, NodeAPI } from 'node-red';
import { ChargingError } from '../lib/errors';
import type { ServiceClient } from '../lib/client/service-client';
import type { DeriveOptions } from '../lib/session/record';
import type { Coordination } from '../lib/coordination/coordination';
import type { ConfigurationMetrics } from '../lib/metrics/configuration';

/** The public face of a charging-service config node. */
export interface ChargingServiceNode extends Node {
  /** the shared client, or a CONFIG error saying what is wrong with the configuration */
  getClient(): ServiceClient;
  /** how this configuration shares its work with other replicas (alone: LocalCoordination, the default) */
  getCoordination(): Coordination;
  readonly deriveOptions: DeriveOptions;
  /** this configuration's metrics: what its nodes count and the figures they let a scrape read */
  readonly metrics: ConfigurationMetrics;
}

export function getService(RED: NodeAPI, serviceId: string | undefined): ChargingServiceNode {
  const service = serviceId ? (RED.nodes.getNode(serviceId) as ChargingServiceNode | null) : null;
  if (!service || typeof service.getClient !== 'function') {
    throw new ChargingError('CONFIG', 'No charging-service configuration is selected in this node');
  }
  return service;
}
