/**
 * "Test connection" in the config dialog: POST /charging-service/test with the
 * values being edited. Behind the same permission as editing flows (as every
 * admin route of the Home Assistant nodes); answers ok or the reason, never the
 * token or the secret. With *Coordinate replicas* set, `redis` says whether
 * Redis answers and lists the fleet's live replicas (fleet-test.ts).
 */
import type { Node, NodeAPI } from 'node-red';
import { ServiceClient } from '../lib/client/service-client';
import type { ConnectionReport } from '../lib/client/service-client';
import { envReference } from '../lib/settings';
import { clientOptions, Credentials, effectiveCredentials, ServiceSettings } from './service-options';
import { checkRedis } from './fleet-test';

type TestAnswer = (ConnectionReport & { error?: string }) | { ok: false; error: string; message: string };

async function test(RED: NodeAPI, settings: ServiceSettings, credentials: Credentials, skipProbe?: string): Promise<TestAnswer> {
  let client: ServiceClient | null = null;
  try {
    client = new ServiceClient(clientOptions(RED, settings, credentials).options);
    const report = await client.testConnection({ skipProbe });
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
    const clientSecret = typed ? (body.clientSecret as string) : stored?.clientSecret;
    const clientId = typeof body.clientId === 'string' && body.clientId !== '' ? body.clientId : stored?.clientId;
    const typedKey = typeof body.apiKey === 'string' && body.apiKey !== '__PWRD__';
    const apiKey = typedKey ? (body.apiKey as string) : stored?.apiKey;
    // A secret the user did not type (stored, or from the environment) only ever goes to the
    // token URL it was deployed with, or to one the environment names: otherwise the test would
    // let an editor user send a secret they cannot read to a host of their choosing.
    const storedSecret = !typed && !!effectiveCredentials({ clientId, clientSecret }).clientSecret;
    const refused = storedSecret && !trustedUrl(RED, id, 'authUrl', body.authUrl);
    // The token that stored secret buys is a live credential too: it goes only to the deployed base URL (or a `${NAME}` one).
    // So is a stored API key.
    const storedKey = !typedKey && !!apiKey;
    const skipProbe =
      (storedSecret || storedKey) && !trustedUrl(RED, id, 'baseUrl', body.baseUrl)
        ? `${storedSecret ? 'a token issued for the stored secret' : 'the stored API key'} is only sent to the deployed Base URL. Deploy this Base URL, or retype the ${storedSecret ? 'client secret' : 'API key'}, to test it`
        : undefined;
    // Coordinate replicas: a URL typed, or the stored one behind "__PWRD__"; empty: Redis is not checked.
    // Redis is checked even when the service is not (the URL is its own credential and goes only to its own host).
    const typedRedis = typeof body.coordination === 'string' && body.coordination !== '__PWRD__';
    const coordination = typedRedis ? (body.coordination as string).trim() : stored?.coordination;
    const credentials = { clientId, clientSecret, apiKey, coordination };
    const error = 'Retype the client secret to test this token URL: a stored secret is only sent to the deployed token URL';
    const service = refused ? Promise.resolve({ ok: false as const, error, message: error }) : test(RED, body, credentials, skipProbe);
    void Promise.all([service, coordination ? checkRedis(RED, body, credentials) : undefined]).then(([answer, redis]) => res.json(redis ? { ...answer, redis } : answer));
  });
}

/** The deployed configuration's URL of that kind, or `${NAME}` (the process's environment, which editor users cannot set). */
function trustedUrl(RED: NodeAPI, id: string, which: 'authUrl' | 'baseUrl', typed: unknown): boolean {
  if (envReference(typed) !== undefined) return true;
  const deployed = id ? (RED.nodes.getNode(id) as (Node & { authUrl?: string; baseUrl?: string }) | null) : null;
  return !!deployed && typeof deployed[which] === 'string' && deployed[which] === String(typed ?? '').trim();
}
