/**
 * The package's library entry point (package.json "main"): the plain TypeScript
 * pieces behind the nodes, for flows that need them in a function node
 * (settings.js functionExternalModules) or for other tools. No Node-RED inside.
 */
export { ServiceClient, tokenEndpoint, sessionsEndpoint, basicCredentials } from './service-client';
export type { ServiceClientOptions, RetryPolicy, ActionResult, ProgressResult } from './service-client';
export { TokenCache } from './token-cache';
export { ChargingError, isChargingError } from './errors';
export type { ChargingErrorCode } from './errors';
export { deriveSession, resolveFields, startCommand, stopCommand } from './session';
export type { ChargingCommand, ProgressRecord, SessionInfo, DeriveOptions } from './session';
export { SessionWatcher, waitForSession } from './session-watcher';
export type { WatchEvent, WatchEventKind, WatchedSession } from './session-watcher';
