/**
 * "Test connection" in the config dialog: POST /charging-service/test with the
 * values being edited. Behind the same permission as editing flows (as every
 * admin route of the Home Assistant nodes); answers ok or the reason, never the
 * token or the secret.
 */
import type { Node, NodeAPI } from 'node-red';
import { ServiceClient } from '../lib/client/service-client';
import type { ConnectionReport } from '../lib/client/service-client';
import { clientOptions, Credentials, ServiceSettings } from './service-options';

type TestAnswer = (ConnectionReport & { error?: string }) | { ok: false; error: string; message: string };

async function test(RED: NodeAPI, settings: ServiceSettings, credentials: Credentials): Promise<TestAnswer> {
  let client: ServiceClient | null = null;
  try {
    client = new ServiceClient(clientOptions(RED, settings, credentials).options);
    const report = await client.testConnection();
    return report.ok ? report : { ...report, error: report.message };
  } catch (err) {
    const raw = err instanceof Error ? err.message : String(err);
    const message = client ? client.redact(raw) : raw;
    return { ok: false, error: message, message };
  } finally {
    void client?.close();
  }
}

export function registerTestRoute(RED: NodeAPI): void {
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
      const error = 'Retype the client secret to test this token URL: the stored secret is only sent to the deployed token URL';
      res.json({ ok: false, error, message: error });
      return;
    }
    const clientSecret = typed ? (body.clientSecret as string) : stored?.clientSecret;
    const clientId = typeof body.clientId === 'string' && body.clientId !== '' ? body.clientId : stored?.clientId;
    void test(RED, body, { clientId, clientSecret }).then((answer) => res.json(answer));
  });
}
