/**
 * What Test connection may use of the values a dialog sent, measured against
 * the deployed configuration (test-connection.ts). Anyone with the write
 * permission can call the route without deploying, so nothing it sends may
 * reach a value they could not read or deploy themselves:
 *
 * - a `${NAME}` is read from Node-RED's environment only where the deployed
 *   configuration has the same `${NAME}` in the same field;
 * - a stored secret (client secret, API key, or CHARGING_CLIENT_SECRET) goes
 *   only with the deployed URLs, the deployed TLS configuration and the
 *   deployed "Allow insecure http", whatever the dialog says;
 * - a stored Redis URL goes only with the deployed Redis TLS configuration.
 */
import type { Node, NodeAPI } from 'node-red';
import { envReference } from '../lib/settings';
import { Credentials, effectiveCredentials, ENV_CLIENT_ID, ENV_CLIENT_SECRET, ServiceSettings } from './service-options';

/** The configuration deployed under the dialog's id. */
export interface Deployed {
  /** as written in the flow: `${NAME}` not expanded */
  config: Record<string, unknown>;
  /** the URLs as the node got them, `${NAME}` expanded by Node-RED */
  expanded: { baseUrl?: string; authUrl?: string };
  /** as stored: `${NAME}` not expanded */
  credentials: Credentials;
}

export interface DialogValues {
  settings: ServiceSettings;
  credentials: Credentials;
  /** only the variables the deployed configuration itself names, and the two credential fallbacks */
  env: NodeJS.ProcessEnv;
  /** the client secret is not the dialog's own: stored, or from the environment */
  storedSecret: boolean;
  storedKey: boolean;
  storedRedis: boolean;
  /** the dialog's URL is the deployed one (as written, or as expanded) */
  deployedUrl: { baseUrl: boolean; authUrl: boolean };
}

const SETTINGS_FIELDS = [
  ['baseUrl', 'Base URL'],
  ['authUrl', 'Token URL'],
  ['apiKeyHeader', 'API key header'],
  ['tokenParams', 'Token parameters'],
] as const;
const CREDENTIAL_FIELDS = [
  ['apiKey', 'API key'],
  ['coordination', 'Coordinate replicas'],
] as const;

export function deployedOf(RED: NodeAPI, id: string): Deployed | undefined {
  if (id === '') return undefined;
  let config: Record<string, unknown> | undefined;
  RED.nodes.eachNode((n) => {
    if (n.id === id && n.type === 'charging-service') config = n as unknown as Record<string, unknown>;
  });
  if (!config) return undefined;
  const node = RED.nodes.getNode(id) as (Node & { baseUrl?: string; authUrl?: string }) | null;
  const credentials = (RED.nodes.getCredentials(id) ?? {}) as Credentials;
  return { config, expanded: { baseUrl: node?.baseUrl, authUrl: node?.authUrl }, credentials };
}

/** A value the dialog sent for a password field: the editor sends "__PWRD__" for one not retyped. */
function typedPassword(value: unknown): value is string {
  return typeof value === 'string' && value !== '__PWRD__';
}

/** The dialog's values to test with, or why they are refused (naming the field, never a value). */
export function dialogValues(body: Record<string, unknown>, deployed: Deployed | undefined, env: NodeJS.ProcessEnv): DialogValues | { refused: string } {
  const stored = deployed?.credentials ?? {};
  const typedSecret = typedPassword(body.clientSecret) && body.clientSecret !== '';
  const typedKey = typedPassword(body.apiKey);
  const typedRedis = typedPassword(body.coordination);
  const credentials: Credentials = {
    clientId: typeof body.clientId === 'string' && body.clientId !== '' ? body.clientId : stored.clientId,
    clientSecret: typedSecret ? (body.clientSecret as string) : stored.clientSecret,
    apiKey: typedKey ? (body.apiKey as string) : stored.apiKey,
    coordination: typedRedis ? (body.coordination as string).trim() : stored.coordination,
  };
  const names = allowedNames(body, credentials, deployed);
  if (typeof names === 'string') return { refused: names };
  const allowed: NodeJS.ProcessEnv = { [ENV_CLIENT_ID]: env[ENV_CLIENT_ID], [ENV_CLIENT_SECRET]: env[ENV_CLIENT_SECRET] };
  for (const name of names) allowed[name] = env[name];
  const storedSecret = !typedSecret && !!effectiveCredentials(credentials, allowed).clientSecret;
  const storedKey = !typedKey && !!credentials.apiKey;
  const storedRedis = !!credentials.coordination && (!typedRedis || same(credentials.coordination, stored.coordination));
  const settings: ServiceSettings = { ...body };
  // The deployed URL as Node-RED expanded it: it also reads the flow's environment, $(NAME) and NR_* names, which `env` cannot.
  for (const which of ['baseUrl', 'authUrl'] as const) {
    const expanded = deployed?.expanded[which];
    if (same(body[which], deployed?.config[which]) && typeof expanded === 'string' && expanded !== '') settings[which] = expanded;
  }
  if (storedSecret || storedKey) {
    settings.tls = deployed?.config.tls;
    settings.allowInsecureHttp = deployed?.config.allowInsecureHttp;
  }
  if (storedRedis) settings.fleetTls = deployed?.config.fleetTls;
  const isDeployed = (which: 'baseUrl' | 'authUrl'): boolean => !!deployed && (same(body[which], deployed.config[which]) || same(body[which], deployed.expanded[which]));
  return { settings, credentials, env: allowed, storedSecret, storedKey, storedRedis, deployedUrl: { baseUrl: isDeployed('baseUrl'), authUrl: isDeployed('authUrl') } };
}

/** The environment variables the dialog's `${NAME}` values may read, or the refusal for the first that may not. */
function allowedNames(body: Record<string, unknown>, credentials: Credentials, deployed: Deployed | undefined): string[] | string {
  const names: string[] = [];
  const fields: Array<[string, unknown, unknown]> = [
    ...SETTINGS_FIELDS.map(([key, label]): [string, unknown, unknown] => [label, body[key], deployed?.config[key]]),
    ...CREDENTIAL_FIELDS.map(([key, label]): [string, unknown, unknown] => [label, credentials[key], deployed?.credentials[key]]),
  ];
  for (const [label, value, deployedValue] of fields) {
    const name = envReference(value);
    if (name === undefined) continue;
    if (!same(value, deployedValue)) {
      return `${label}: a \${NAME} typed in the dialog is read from Node-RED's environment only when the deployed configuration has the same one in this field. Deploy it, then test`;
    }
    names.push(name);
  }
  return names;
}

function same(a: unknown, b: unknown): boolean {
  return typeof a === 'string' && typeof b === 'string' && a.trim() !== '' && a.trim() === b.trim();
}
