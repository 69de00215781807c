/**
 * What a ServiceClient takes from the fleet (docs/fleet.md), as plain types,
 * so that the client loads no Redis code: nodes/lib/fleet/fleet.ts implements
 * them when the configuration coordinates replicas.
 */
import type { SharedBudgetGate } from './admission';
import type { TokenResponse } from './token-cache';

/** The fleet's side of the client's token and budget. */
export interface FleetHooks {
  /** a token for the cache: the fleet's, or one fetched with fetchLocal for it (Redis away: for this replica alone) */
  fetchToken(fetchLocal: () => Promise<TokenResponse>, identity: TokenIdentity): Promise<TokenResponse>;
  /** the service refused this token (401): forget it in Redis too; never rejects */
  invalidateToken(value: string, identity: TokenIdentity): void;
  /** the fleet's Max requests per second at this limit */
  budget(limit: number): SharedBudgetGate;
}

/**
 * The account a token is issued for, as the fleet names and seals it in
 * Redis (nodes/lib/fleet/token-seal.ts): everything the token request says
 * about who asks and for what. The secret is used there only to derive the
 * sealing key; it never goes to Redis.
 */
export interface TokenIdentity {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope: string;
  tokenParams: ReadonlyArray<readonly [string, string]>;
}
