/**
 * The package's library entry point (package.json "main"): the plain TypeScript
 * pieces behind the nodes, for flows that need them in a function node
 * (settings.js functionExternalModules) or for other tools. No Node-RED inside.
 */
export { ServiceClient, sessionsEndpoint } from './client/service-client';
export type { ServiceClientOptions, RequestOptions } from './client/service-client';
export type { ActionResult, ProgressResult } from './client/answers';
export type { ConnectionReport } from './client/connection-test';
export type { RetryPolicy } from './client/request';
export { tokenEndpoint, basicCredentials, AUTH_METHODS } from './client/token-endpoint';
export type { AuthMethod } from './client/token-endpoint';
export { TokenCache } from './client/token-cache';
export { ChargingError, isChargingError } from './errors';
export type { ChargingErrorCode } from './errors';
export { startCommand, stopCommand } from './session/commands';
export type { ChargingCommand } from './session/commands';
export { resolveFields, tokensFrom } from './session/inputs';
export { deriveSession, hasTransaction } from './session/record';
export type { ProgressRecord, SessionInfo, DeriveOptions } from './session/record';
export { resolveStop } from './session/stop';
export { SessionWatcher } from './session/watcher';
export type { WatchEvent, WatchEventKind, WatchedSession } from './session/watcher';
export { waitForSession } from './session/wait';
