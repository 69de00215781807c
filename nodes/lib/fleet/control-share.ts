/**
 * charging-control across a fleet of replicas (docs/fleet.md
 * "Control"): each target (locationId, evseId, token) is held by one replica
 * through a lease, as a watched token is (a WatchOwnership scope of target
 * keys); only the holder reads progress and sends. Its memory (wanted state,
 * the command on its way, the guard's clock) is the scope's committed state:
 * written by the holder only, before a command is sent, and taken up by the
 * next holder, so a hand-over neither repeats a command nor forgets the guard.
 * Wishes may reach any replica: each is posted with a sequence number, and the
 * holder applies the newest at its next check. The same wish posted by every
 * replica (an MQTT subscription on each) changes nothing the second time.
 */
import { DEFAULT_RETRY } from '../client/request';
import { ChargingError } from '../errors';
import type { ControlStore } from '../control/store';
import type { ControlMemory, KeptTarget } from '../control/memory';
import type { Fleet } from './fleet';
import type { WatchOwnership } from './ownership';
import type { OwnershipOptions } from './ownership-types';
import { POST_WISH } from './scripts';

export interface FleetWish {
  seq: number;
  wanted: boolean;
  force?: boolean;
  restart?: boolean;
  /** kWh; null: none; absent: the node's setting */
  energyLimit?: number | null;
}

/**
 * A START taken over from another holder is not sent again before the old
 * holder's could no longer go out: its message budget (queue, token, retries)
 * plus the lease, counted from the take-over on this replica's monotonic
 * clock. The old lease lapsed in Redis before this replica could take it, so
 * that is later than the same time counted from the old holder's commit on
 * Redis's clock, whatever the wall clocks say. A STOP is not held back: sent
 * twice it is harmless, held back the car charges on.
 */
export function fenceInherited(m: ControlMemory, now: number, waitMs: number, leaseMs: number): void {
  const cmd = m.command;
  if (cmd?.action === 'START') cmd.at = Math.max(cmd.at, now + DEFAULT_RETRY.maxTotalMs + leaseMs - waitMs);
}

export class FleetControlShare {
  readonly own: WatchOwnership<KeptTarget>;
  private readonly wishKey: string;

  constructor(
    private readonly fleet: Fleet,
    private readonly scope: string,
    options: OwnershipOptions<KeptTarget>,
  ) {
    this.own = fleet.ownership<KeptTarget>(`control:${scope}`, options);
    this.wishKey = fleet.keys.controlWishes(scope);
  }

  /** The holder's store: a write is a commit that holds only while its lease does (otherwise nothing is sent). */
  store(): ControlStore {
    return {
      load: () => Promise.resolve([]), // targets come with their leases (onChange), not from a load
      save: async (key, kept) => {
        const res = await this.own.commit(key, kept ?? null);
        if (!res.ok) throw new ChargingError('NETWORK', `Coordinate replicas: could not keep the target's state in Redis (${res.message}); nothing was sent`);
      },
    };
  }

  /** Adds the target to the fleet's list: the replica that should hold it takes its lease at its next cycle. */
  add(key: string): Promise<void> {
    return this.own.watch([key]);
  }

  holds(key: string): boolean {
    return this.own.mayPoll(key);
  }

  /** A wish from this replica's flow, for the holder to apply. Throws when Redis cannot take it (the flow hears of it). */
  async post(key: string, wish: Omit<FleetWish, 'seq'>): Promise<number> {
    const seq = await this.fleet.connection.eval(POST_WISH, [this.wishKey], [key, JSON.stringify(wish)]);
    return Number(seq);
  }

  /** The newest wish for each target (null: none); a Redis failure reads as none (the next check reads again). */
  async wishes(keys: string[]): Promise<Map<string, FleetWish | null>> {
    const out = new Map<string, FleetWish | null>();
    if (keys.length === 0) return out;
    let raw: Array<string | null>;
    try {
      raw = await this.fleet.connection.run('reading control wishes', (r) => r.hmget(this.wishKey, ...keys));
    } catch {
      return out;
    }
    keys.forEach((k, i) => out.set(k, parseWish(raw[i])));
    return out;
  }

  /** Leases given back; a removed node's targets and wishes leave the fleet. */
  async close(removed: boolean): Promise<void> {
    if (removed) {
      await this.own.unwatch(this.own.watched()).catch(() => undefined);
      await this.fleet.connection.run('forgetting control wishes', (r) => r.del(this.wishKey)).catch(() => undefined);
    }
    await this.fleet.closeOwnership(`control:${this.scope}`);
  }
}

function parseWish(raw: string | null | undefined): FleetWish | null {
  if (typeof raw !== 'string') return null;
  const colon = raw.indexOf(':');
  const seq = Number(raw.slice(0, colon));
  try {
    const w = JSON.parse(raw.slice(colon + 1)) as Partial<FleetWish>;
    if (!Number.isFinite(seq) || typeof w.wanted !== 'boolean') return null;
    const limit = typeof w.energyLimit === 'number' && Number.isFinite(w.energyLimit) && w.energyLimit > 0 ? w.energyLimit : w.energyLimit === null ? null : undefined;
    return { seq, wanted: w.wanted, force: w.force === true, restart: w.restart === true, ...(limit !== undefined ? { energyLimit: limit } : {}) };
  } catch {
    return null;
  }
}
