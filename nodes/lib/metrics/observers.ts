/**
 * What the code that already knows a fact tells the metrics (metrics/*.ts
 * turn it into Prometheus series): one small interface per capability, each
 * with a do-nothing default, so that a caller never asks whether metrics are
 * on. No prom-client in here: the request pipeline loads nothing for them.
 *
 * On the request path a call costs a counter increment and, for a finished
 * request, a histogram observation: nothing else is computed per request.
 */
import type { ChargingErrorCode } from '../errors';
import type { WatchEventKind } from '../session/tracker';

/** What a request was: a token flight, a START, a STOP or a progress query (a watch poll is one too). */
export type RequestKind = 'token' | 'start' | 'stop' | 'progress';

/** The request pipeline (client/request.ts, admission.ts, token-endpoint.ts). */
export interface RequestMetrics {
  /** A request's whole journey ended (its retries and waits in it): null when answered, else its error's code. */
  finished(kind: RequestKind, code: ChargingErrorCode | null, seconds: number): void;
  /** One more attempt of a request after a failed one. */
  retried(kind: RequestKind): void;
  /** The service (or the token endpoint) answered 429 Too Many Requests. */
  throttled(kind: RequestKind): void;
  /** A request waited this long for its place in Max requests per second (the local budget and the fleet's). */
  budgetWaited(seconds: number): void;
}

/** The token cache (client/token-cache.ts). */
export interface TokenMetrics {
  /** A new access token was taken into use (from the token endpoint or, with replicas, from the fleet). */
  renewed(): void;
  /** Getting a token failed, or the service refused a fresh one. */
  failed(code: ChargingErrorCode): void;
}

/** Everything a ServiceClient tells. */
export interface ClientMetrics extends RequestMetrics, TokenMetrics {}

/** A watch node (charging-progress in watch mode). */
export interface WatchMetrics {
  /** One event went out on the node's output. */
  emitted(event: WatchEventKind): void;
}

const nothing = (): void => undefined;

export const NO_CLIENT_METRICS: ClientMetrics = { finished: nothing, retried: nothing, throttled: nothing, budgetWaited: nothing, renewed: nothing, failed: nothing };
export const NO_WATCH_METRICS: WatchMetrics = { emitted: nothing };
