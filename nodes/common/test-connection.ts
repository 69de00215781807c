/**
 * "Test connection" in the config dialog: POST /charging-service/test with the
 * values being edited. Behind the same permission as editing flows (as every
 * admin route of the Home Assistant nodes); answers ok or the reason, never the
 * token or the secret. With *Coordinate replicas* set, `redis` says whether
 * Redis answers and lists the fleet's live replicas (nodes/lib/fleet/redis-check.ts).
 *
 * What a user with only the write permission must not get from it
 * (docs/reliability.md, "Threat model"): a value of Node-RED's environment, or
 * a stored secret sent to a place of their choosing. So the dialog's values are
 * compared with the deployed configuration (dialog-values.ts): a `${NAME}` is
 * read only where the deployed configuration has the same one, and a stored
 * secret goes only with the deployed URLs and TLS configuration.
 */
import type { NodeAPI } from 'node-red';
import { ServiceClient } from '../lib/client/service-client';
import { ChargingError } from '../lib/errors';
import type { ConnectionReport } from '../lib/client/connection-test';
import type { RedisAnswer } from '../lib/fleet/redis-check';
import { clientOptions, Credentials, fleetSettings, ServiceSettings } from './service-options';
import { deployedOf, dialogValues } from './dialog-values';

type TestAnswer = (ConnectionReport & { error?: string }) | { ok: false; error: string; message: string };

/**
 * A token URL typed in the dialog may be any host of Node-RED's network: what
 * it answered is quoted only when it is an OAuth error (RFC 6749 §5.2, which
 * helps to fix a new configuration; the body's JSON is summarised as
 * "code: description"), or the dialog would read any page that ends in
 * /v1/token. The deployed token URL's answer is always quoted.
 */
function unquoted(message: string, err: unknown): string {
  const said = err instanceof ChargingError ? (err.serviceMessage ?? '') : '';
  if (said === '' || OAUTH_ERROR.test(said)) return message;
  return message.split(` (${said})`).join(' (its answer is quoted only for the deployed token URL, or an OAuth error)');
}
const OAUTH_ERROR = /^(invalid_request|invalid_client|invalid_grant|unauthorized_client|unsupported_grant_type|invalid_scope)(:|$)/;

async function test(RED: NodeAPI, settings: ServiceSettings, credentials: Credentials, env: NodeJS.ProcessEnv, skipProbe: string | undefined, typedAuthUrl: boolean): Promise<TestAnswer> {
  let client: ServiceClient | null = null;
  try {
    client = new ServiceClient(clientOptions(RED, settings, credentials, env).options);
    const report = await client.testConnection({ skipProbe });
    return report.ok ? report : { ...report, error: report.message };
  } catch (err) {
    const raw = err instanceof Error ? err.message : String(err);
    const redacted = client ? client.redact(raw) : raw;
    const message = typedAuthUrl ? unquoted(redacted, err) : redacted;
    return { ok: false, error: message, message };
  } finally {
    void client?.close();
  }
}

function refusal(error: string): TestAnswer {
  return { ok: false, error, message: error };
}

/** The answer to one dialog's request; never throws for what the body holds. */
async function answer(RED: NodeAPI, body: Record<string, unknown>): Promise<TestAnswer & { redis?: RedisAnswer }> {
  const id = typeof body.id === 'string' ? body.id : '';
  const values = dialogValues(body, deployedOf(RED, id), process.env);
  if ('refused' in values) return refusal(values.refused);
  const { settings, credentials, env, storedSecret, storedKey } = values;
  const refused = storedSecret && !values.deployedUrl.authUrl ? 'Retype the client secret to test this token URL: a stored secret is only sent to the deployed token URL' : undefined;
  // The token that stored secret buys is a live credential too: it goes only to the deployed base URL. So is a stored API key.
  const skipProbe =
    (storedSecret || storedKey) && !values.deployedUrl.baseUrl
      ? `${storedSecret ? 'a token issued for the stored secret' : 'the stored API key'} is only sent to the deployed Base URL. Deploy this Base URL, or retype the ${storedSecret ? 'client secret' : 'API key'}, to test it`
      : undefined;
  // Redis is checked even when the service is not (the URL is its own credential and goes only to its own host).
  const service = refused ? Promise.resolve(refusal(refused)) : test(RED, settings, credentials, env, skipProbe, !values.deployedUrl.authUrl);
  const redis = credentials.coordination ? checkRedis(RED, settings, credentials, env, values.storedRedis) : undefined;
  const [result, redisAnswer] = await Promise.all([service, redis]);
  return redisAnswer ? { ...result, redis: redisAnswer } : result;
}

const UNEXPECTED = 'Test connection failed unexpectedly; nothing more is said here, so that no value leaks. Deploy and see the log, or report it';

export function registerTestRoute(RED: NodeAPI): void {
  RED.httpAdmin.post('/charging-service/test', RED.auth.needsPermission('charging-service.write'), (req, res) => {
    // Every path answers: a failure nobody foresaw must not leave the dialog waiting.
    const fail = (): void => {
      if (!res.headersSent) res.status(500).json(refusal(UNEXPECTED));
    };
    try {
      const body = req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body) ? (req.body as Record<string, unknown>) : {};
      answer(RED, body).then((a) => res.json(a), fail);
    } catch {
      fail();
    }
  });
}

/**
 * The Redis this configuration would join, checked (nodes/lib/fleet/redis-check.ts).
 * The fleet key is derived from the client's own options, so that the test
 * looks at the fleet the deployed node joins. ioredis is loaded only here,
 * when a URL is given.
 */
async function checkRedis(RED: NodeAPI, settings: ServiceSettings, credentials: Credentials, env: NodeJS.ProcessEnv, stored: boolean): Promise<RedisAnswer> {
  let fleet;
  try {
    fleet = fleetSettings(RED, settings, credentials, clientOptions(RED, settings, credentials, env).options, env);
  } catch (err) {
    // CONFIG errors of the settings name the field and never hold a value typed in a password field.
    return { ok: false, message: `Redis not checked: ${(err as Error).message}` };
  }
  if (!fleet) return { ok: false, message: 'Coordinate replicas is empty: nothing to check' };
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const check = require('../lib/fleet/redis-check') as typeof import('../lib/fleet/redis-check');
  return check.checkRedis(fleet, stored);
}
