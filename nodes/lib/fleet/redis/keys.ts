/**
 * The fleet key and the Redis keys under it (docs/fleet.md, "Keys").
 *
 * Replicas coordinate when their configurations have the same fleet key. By
 * default it is derived from what identifies the service account: the base
 * URL, the token URL and the client ID, hashed (so that no URL or client ID is
 * readable in Redis), and never from the client secret: a rotated secret
 * keeps the fleet, and nothing about the secret reaches Redis. Several
 * configurations, and several fleets, can share one Redis.
 *
 * Every key of a fleet starts with `chargectl:{<fleet key>}:`. The braces are a
 * Redis Cluster hash tag: all keys of a fleet live in one slot, so a Lua
 * script may touch several of them.
 */
import { createHash } from 'node:crypto';
import { ChargingError } from '../../errors';
import { trimTrailingSlashes } from '../../settings';

/** A fleet key given by the user: short, printable, no braces (they would break the hash tag). */
export const FLEET_KEY_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

export interface FleetIdentity {
  baseUrl: string;
  tokenUrl: string;
  clientId: string;
}

/**
 * The fleet key: the user's, checked, or one derived from the base URL, the
 * token URL and the client ID ("f-" and 20 hex digits of a SHA-256).
 */
export function fleetKeyFor(identity: FleetIdentity, given?: string): string {
  const key = typeof given === 'string' ? given.trim() : '';
  if (key !== '') {
    if (!FLEET_KEY_PATTERN.test(key)) {
      throw new ChargingError('CONFIG', 'Fleet key: use 1 to 64 letters, digits and . _ : - (it names the fleet in Redis)', { field: 'fleetKey' });
    }
    return key;
  }
  const norm = (u: string) => trimTrailingSlashes(String(u ?? '').trim());
  const digest = createHash('sha256').update(JSON.stringify([norm(identity.baseUrl), norm(identity.tokenUrl), String(identity.clientId ?? '')])).digest('hex');
  return `f-${digest.slice(0, 20)}`;
}

/** Short, stable, key-safe name for anything a key is made from (a scope, a command). */
export function digestOf(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 32);
}

/** The names of a fleet's keys; nothing else builds a key. */
export class FleetKeys {
  readonly prefix: string;

  constructor(readonly fleetKey: string) {
    if (!FLEET_KEY_PATTERN.test(fleetKey)) throw new ChargingError('CONFIG', `Fleet key "${fleetKey.slice(0, 70)}" is not valid`, { field: 'fleetKey' });
    this.prefix = `chargectl:{${fleetKey}}:`;
  }

  /** one account's shared access token, sealed (token-seal.ts), and its lifetime; `identity`: tokenIdentityDigest */
  token(identity: string): string {
    return `${this.prefix}token:${identity}`;
  }

  /** held by the one replica fetching that account's token (single flight across replicas) */
  tokenLock(identity: string): string {
    return `${this.prefix}token:${identity}:lock`;
  }

  /** the fleet's request budget: when the next request may start (server µs) */
  get budget(): string {
    return `${this.prefix}budget`;
  }

  /** live replicas: sorted set, member = replica id, score = when its heartbeat lapses (server ms) */
  get replicas(): string {
    return `${this.prefix}replicas`;
  }

  /** what each live replica says about itself (host, pid, tokens owned): hash replica id -> JSON */
  get replicaInfo(): string {
    return `${this.prefix}replicas:info`;
  }

  /**
   * Work done once by the fleet (claims): its claim, then its outcome.
   * `digest`: digestOf the caller's key parts. Named `cmd:` as when only
   * START and STOP were claimed, so that replicas of both versions claim a
   * command under the same key.
   */
  claim(digest: string): string {
    return `${this.prefix}cmd:${digest}`;
  }

  /** the keys of one grant pool (a depot: the same name on every replica) */
  grants(pool: string): GrantKeys {
    const p = `${this.prefix}g:${digestOf(['grants', pool]).slice(0, 16)}:`;
    return { entries: `${p}e`, queue: `${p}q`, holders: `${p}h`, waitExpiry: `${p}wx`, lapses: `${p}lx`, rules: `${p}r` };
  }

  /**
   * The keys of one lease scope (the same name on every replica); `inbox`:
   * the name of its messages, if it takes any (a control node's wishes: the
   * key they had before they were a scope's messages, so that replicas of
   * both versions read the same wishes).
   */
  scope(scope: string, inbox?: string): ScopeKeys {
    const id = digestOf(['scope', scope]).slice(0, 16);
    const p = `${this.prefix}w:${id}:`;
    return {
      inbox: inbox === undefined ? '' : `${this.prefix}c:${digestOf(['control', inbox]).slice(0, 16)}:wish`,
      list: `${p}list`,
      version: `${p}ver`,
      epoch: `${p}epoch`,
      lossMark: `${p}loss`,
      restores: `${p}restores`,
      members: `${p}members`,
      state: `${p}state`,
      lease: (token: string) => `${p}lease:${token}`,
    };
  }
}

export interface ScopeKeys {
  /** messages for the items' holders: hash item -> "<seq>:<text>", and "#seq" (the counter); '' when the scope takes none */
  inbox: string;
  /** the scope's items (set) */
  list: string;
  /** bumped at every change of the list, so that replicas read the list only when it changed */
  version: string;
  /** written once while the scope's keys are empty: another value than the one a replica saw says Redis lost its data */
  epoch: string;
  /** after a loss, the members that have not put their states back yet (set): while it lives, a token taken with no state waits (data-loss.ts) */
  lossMark: string;
  /** counts the restores that wrote a state: a holder that sees it change reloads the states of its tokens (data-loss.ts) */
  restores: string;
  /** replicas running this scope: sorted set as `replicas` */
  members: string;
  /** each item's last committed state: hash item -> state-codec.ts's "<rev>:<ids>:<JSON>" */
  state: string;
  /** who holds an item: value = replica id, with a TTL */
  lease(item: string): string;
}

/** A grant pool's keys (grants/grant-lua.ts says what each holds). */
export interface GrantKeys {
  entries: string;
  queue: string;
  holders: string;
  waitExpiry: string;
  lapses: string;
  rules: string;
}
