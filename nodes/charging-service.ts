import type { NodeAPI, Node, NodeDef } from 'node-red';
import type https from 'node:https';
import { ServiceClient, ServiceClientOptions } from './lib/service-client';
import { ChargingError } from './lib/errors';
import { checkEndpointUrl, positiveNumber } from './lib/config';
import type { DeriveOptions, MeterUnit, TimestampZone } from './lib/session';
import type { ChargingServiceNode } from './common/node-support';

interface ServiceConfig extends NodeDef {
  baseUrl: string;
  authUrl: string;
  scope: string;
  timeout?: string | number; // seconds
  maxInFlight?: string | number;
  allowInsecureHttp?: boolean;
  tls?: string;
  meterUnit?: MeterUnit;
  timestampZone?: TimestampZone;
}

interface Credentials {
  clientId?: string;
  clientSecret?: string;
}

async function testConnection(RED: NodeAPI, values: Record<string, unknown>): Promise<{ ok: true; expiresIn?: number } | { ok: false; error: string }> {
  let client: ServiceClient | null = null;
  try {
    const allowHttp = values.allowInsecureHttp === true;
    const base = checkEndpointUrl('Base URL', values.baseUrl, allowHttp);
    const auth = checkEndpointUrl('Token URL', values.authUrl, allowHttp);
    if (typeof values.clientId !== 'string' || !values.clientId) throw new ChargingError('CONFIG', 'The client ID is not set');
    if (typeof values.clientSecret !== 'string' || !values.clientSecret) throw new ChargingError('CONFIG', 'The client secret is not set');
    client = new ServiceClient({
      baseUrl: base.url,
      authUrl: auth.url,
      scope: typeof values.scope === 'string' ? values.scope : '',
      clientId: values.clientId,
      clientSecret: values.clientSecret,
      timeoutMs: positiveNumber(values.timeout, 10, 1, 300) * 1000,
      tls: tlsOptions(RED, typeof values.tls === 'string' ? values.tls : undefined),
    });
    const { expiresIn } = await client.testConnection();
    return { ok: true, expiresIn };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, error: client ? client.redact(message) : message };
  } finally {
    void client?.close();
  }
}

function tlsOptions(RED: NodeAPI, tlsId: string | undefined): https.AgentOptions | undefined {
  if (!tlsId || tlsId === '_ADD_') return undefined;
  const tlsNode = RED.nodes.getNode(tlsId) as TlsConfigNode | null;
  if (!tlsNode) throw new ChargingError('CONFIG', 'The selected TLS configuration could not be found (deploy it first)');
  const opts: Record<string, unknown> = {};
  tlsNode.addTLSOptions(opts);
  return opts as https.AgentOptions;
}

interface TlsConfigNode extends Node {
  addTLSOptions(opts: Record<string, unknown>): void;
  verifyservercert?: boolean;
}

export = function register(RED: NodeAPI): void {
  function ChargingService(this: ChargingServiceNode & { credentials: Credentials }, config: ServiceConfig): void {
    RED.nodes.createNode(this, config);
    const node = this;
    (node as unknown as { authUrl: string }).authUrl = String(config.authUrl ?? '').trim();
    let client: ServiceClient | null = null;
    let configError: ChargingError | null = null;

    const deriveOptions: DeriveOptions = {
      meterUnit: config.meterUnit === 'kWh' ? 'kWh' : 'Wh',
      timestampZone: config.timestampZone === 'local' ? 'local' : 'UTC',
    };
    Object.defineProperty(node, 'deriveOptions', { value: deriveOptions, enumerable: false });

    try {
      const allowHttp = config.allowInsecureHttp === true;
      const base = checkEndpointUrl('Base URL', config.baseUrl, allowHttp);
      const auth = checkEndpointUrl('Token URL', config.authUrl, allowHttp);
      for (const w of [base.warning, auth.warning]) if (w) node.warn(w);
      const creds = node.credentials ?? {};
      if (!creds.clientId) throw new ChargingError('CONFIG', 'The client ID is not set in the charging-service configuration');
      if (!creds.clientSecret) throw new ChargingError('CONFIG', 'The client secret is not set in the charging-service configuration');

      const tls = tlsOptions(RED, config.tls);

      const options: ServiceClientOptions = {
        baseUrl: base.url,
        authUrl: auth.url,
        scope: config.scope ?? '',
        clientId: creds.clientId,
        clientSecret: creds.clientSecret,
        timeoutMs: positiveNumber(config.timeout, 10, 1, 300) * 1000,
        maxInFlight: Math.round(positiveNumber(config.maxInFlight, 8, 1, 256)),
        tls,
      };
      client = new ServiceClient(options);
    } catch (err) {
      configError = err instanceof ChargingError ? err : new ChargingError('CONFIG', (err as Error).message);
      node.error(configError.message);
    }

    node.getClient = (): ServiceClient => {
      if (configError) throw configError;
      if (!client || client.isClosed) throw new ChargingError('CLOSED', 'The charging-service configuration was closed');
      return client;
    };

    node.on('close', (_removed: boolean, done: () => void) => {
      const c = client;
      client = null;
      if (!c) return done();
      // Nodes using this config have their own grace for requests on the wire;
      // this one bounds whatever is left so close ends well inside Node-RED's 15 s.
      c.close(5_000).then(
        () => done(),
        () => done(),
      );
    });
  }

  // "Test connection" in the config dialog: requests a token with the values being
  // edited. Behind the same permission as editing flows; answers ok or the reason,
  // never the token or the secret (the client redacts the secret from every message).
  RED.httpAdmin.post('/charging-service/test', RED.auth.needsPermission('charging-service.write'), (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const id = typeof body.id === 'string' ? body.id : '';
    const stored = (id ? RED.nodes.getCredentials(id) : undefined) as Credentials | undefined;
    // The editor sends "__PWRD__" for a password the user has not retyped.
    const typed = typeof body.clientSecret === 'string' && body.clientSecret !== '' && body.clientSecret !== '__PWRD__';
    // The stored secret only ever goes to the token URL it was deployed with: otherwise the
    // test would let an editor user send a secret they cannot read to a host of their choosing.
    const deployed = id ? (RED.nodes.getNode(id) as (Node & { authUrl?: string }) | null) : null;
    if (!typed && stored?.clientSecret && (!deployed || deployed.authUrl !== String(body.authUrl ?? '').trim())) {
      res.json({ ok: false, error: 'Retype the client secret to test this token URL: the stored secret is only sent to the deployed token URL' });
      return;
    }
    const secret = typed ? (body.clientSecret as string) : stored?.clientSecret;
    const clientId = typeof body.clientId === 'string' && body.clientId !== '' ? body.clientId : stored?.clientId;
    void testConnection(RED, { ...body, clientId, clientSecret: secret }).then((result) => res.json(result));
  });

  RED.nodes.registerType('charging-service', ChargingService as unknown as (this: Node, def: NodeDef) => void, {
    credentials: {
      clientId: { type: 'text' },
      clientSecret: { type: 'password' },
    },
  });
};
