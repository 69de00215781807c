import type { Node, NodeAPI, NodeDef } from 'node-red';
import { CLOSE_GRACE_MS, ServiceClient } from './lib/client/service-client';
import { ChargingError } from './lib/errors';
import type { DeriveOptions, MeterUnit, TimestampZone } from './lib/session/record';
import type { ChargingServiceNode } from './common/service-node';
import { clientOptions, Credentials, fleetSettings, hostOf, ServiceSettings } from './common/service-options';
import { openCoordination } from './common/coordination-registry';
import type { Coordination } from './lib/coordination/coordination';
import { LocalCoordination } from './lib/coordination/local';
import { registerTestRoute } from './common/test-connection';
import { runtimeMetrics } from './lib/metrics/registry';

interface ServiceConfig extends NodeDef, ServiceSettings {
  meterUnit?: MeterUnit;
  timestampZone?: TimestampZone;
}

/**
 * The configuration node: owns the one ServiceClient (token cache, sockets,
 * limits) that every node using it shares, as the mqtt broker node owns its
 * connection; closes it, with a grace for requests on the wire, on redeploy.
 */
export = function register(RED: NodeAPI): void {
  function ChargingService(this: ChargingServiceNode & { credentials: Credentials; authUrl: string; baseUrl: string }, config: ServiceConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    // Labelled by the name as typed, or the id: never the service's URL.
    const metrics = runtimeMetrics().configuration(config.name, node.id);
    Object.defineProperty(node, 'metrics', { value: metrics, enumerable: false });
    // Log lines read [charging-service:<name>]: without a name, say which service rather than an id.
    if (!config.name) node.name = hostOf(config.baseUrl);
    // Test connection compares against it: the stored secret only goes to the deployed token URL.
    node.authUrl = String(config.authUrl ?? '').trim();
    node.baseUrl = String(config.baseUrl ?? '').trim();
    const deriveOptions: DeriveOptions = {
      meterUnit: config.meterUnit === 'kWh' ? 'kWh' : 'Wh',
      timestampZone: config.timestampZone === 'local' ? 'local' : 'UTC',
    };
    Object.defineProperty(node, 'deriveOptions', { value: deriveOptions, enumerable: false });

    let client: ServiceClient | null = null;
    let coordination: Coordination = new LocalCoordination();
    let releaseFleet: () => Promise<void> = () => Promise.resolve();
    let configError: ChargingError | null = null;
    try {
      const { options, warnings } = clientOptions(RED, config, node.credentials ?? {});
      for (const w of warnings) node.warn(w);
      const fleet = fleetSettings(RED, config, node.credentials ?? {}, options);
      if (fleet?.warning) node.warn(fleet.warning);
      const opened = openCoordination(node, fleet);
      coordination = opened.coordination;
      releaseFleet = opened.release;
      client = new ServiceClient({ ...options, fleet: coordination.clientHooks(), metrics, onWarning: (text) => node.warn(text) });
    } catch (err) {
      void releaseFleet().catch(() => undefined);
      coordination = new LocalCoordination();
      configError = err instanceof ChargingError ? err : new ChargingError('CONFIG', (err as Error).message);
      node.error(configError.message);
    }

    node.getClient = (): ServiceClient => {
      if (configError) throw configError;
      if (!client || client.isClosed) throw new ChargingError('CLOSED', 'The charging-service configuration was closed');
      return client;
    };

    node.getCoordination = (): Coordination => coordination;
    metrics.read('coordination', () => coordination.figures());

    node.on('close', (_removed: boolean, done: () => void) => {
      const c = client;
      client = null;
      metrics.close();
      coordination = new LocalCoordination();
      // Nodes using this config have their own grace for requests on the wire;
      // this one bounds whatever is left so close ends well inside Node-RED's 15 s.
      // The fleet closes last: the client's last requests may still take from its budget.
      const closing = c ? c.close(CLOSE_GRACE_MS).catch(() => undefined) : Promise.resolve();
      void closing.then(() => releaseFleet().catch(() => undefined)).then(() => done());
    });
  }

  registerTestRoute(RED);
  RED.nodes.registerType('charging-service', ChargingService as unknown as (this: Node, def: NodeDef) => void, {
    credentials: {
      clientId: { type: 'text' },
      clientSecret: { type: 'password' },
      apiKey: { type: 'password' },
      coordination: { type: 'password' },
    },
  });
};
