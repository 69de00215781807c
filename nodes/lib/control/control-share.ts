/**
 * A control node's targets on the seam's leases (docs/fleet.md, "Control"):
 * which connectors this process commands, where its memory is kept, where a
 * wish goes. openControlShare picks by what the leases are:
 *
 * - Alone (LocalControlShare): every target is commanded here, its memory is
 *   kept in the node's context, and a wish is checked at once (its failure
 *   goes back to the message that asked).
 * - With replicas (SharedControlShare): each target (locationId, evseId,
 *   token) is held by one replica through a lease; only the holder reads
 *   progress, sends and reports. Its memory (wanted state, the command on its
 *   way, the guard's clock) is the scope's committed state: written by the
 *   holder only, before a command is sent, and taken up by the next holder, so
 *   a hand-over neither repeats a command nor forgets the guard. A wish may
 *   reach any replica: it is posted as a message for the holder, which applies
 *   the newest at its next check, and checks at once when it sees a newer one
 *   (read after each fleet cycle). The same wish posted by every replica (an
 *   MQTT subscription on each) changes nothing the second time.
 */
import { DEFAULT_RETRY } from '../client/request';
import { monotonicNow } from '../clock';
import type { ShareVoice } from '../coordination/coordination';
import type { LeaseChange, LeaseScope, Leases, Posted } from '../coordination/leases';
import { ChargingError } from '../errors';
import type { ControlBook } from './book';
import type { ControlDeps } from './controller';
import { fromKept, type ControlMemory, type ControlSettings, type KeptTarget } from './memory';
import type { WishOptions } from './reconcile';
import type { ControlStore } from './store';
import { targetKey, targetOf, type ControlTarget } from './view';

/** A control node's targets: which connectors this process commands, where its memory is kept, where a wish goes. */
export interface ControlShare {
  /** what the controllers ask: where memory is kept and, shared, who holds a target and its newest wish */
  deps(): Pick<ControlDeps, 'store' | 'mayCommand' | 'passive' | 'pullWish'>;
  /** the book whose targets this share feeds; `onShare` after every gain or loss */
  attach(book: ControlBook, settings: Pick<ControlSettings, 'waitMs'>, onShare: () => void): void;
  /** a wish from this process's flow: alone, the check it causes (its failure, if any); shared, posted for the holder */
  want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<ChargingError | undefined>;
  close(removed: boolean): Promise<void>;
}

/** The node's own store for control memory, and how a removed node forgets it. */
export interface LocalControlStore extends ControlStore {
  clear(): Promise<void>;
}

/** A wish as posted for the holder. */
export interface PostedWish {
  seq: number;
  wanted: boolean;
  force?: boolean;
  restart?: boolean;
  /** kWh; null: none; absent: the node's setting */
  energyLimit?: number | null;
}

export function openControlShare(leases: Leases, name: string, voice: ShareVoice, local: LocalControlStore): ControlShare {
  return leases.lapses ? new SharedControlShare(leases, name, voice) : new LocalControlShare(local);
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

/** Every target commanded here, its memory in the node's context, a wish checked at once. */
class LocalControlShare implements ControlShare {
  private book: ControlBook | null = null;

  constructor(private readonly local: LocalControlStore) {}

  deps(): Pick<ControlDeps, 'store'> {
    return { store: this.local };
  }

  attach(book: ControlBook): void {
    this.book = book;
  }

  want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<ChargingError | undefined> {
    return this.book ? this.book.want(target, wanted, opts) : Promise.resolve(undefined);
  }

  /** A removed node's targets go with it; a redeployed one keeps them for its successor. */
  close(removed: boolean): Promise<void> {
    if (removed) void this.local.clear().catch(() => undefined);
    return Promise.resolve();
  }
}

class SharedControlShare implements ControlShare {
  private readonly scope: LeaseScope<KeptTarget>;
  private book: ControlBook | null = null;
  private waitMs = 0;
  private onShare: () => void = () => undefined;
  private readonly seen = new Map<string, number>();

  constructor(
    leases: Leases,
    name: string,
    private readonly voice: ShareVoice,
  ) {
    this.scope = leases.open<KeptTarget>(`control:${name}`, {
      inbox: name,
      onChange: (change) => this.changed(change),
      onMessages: (newest) => this.newer(newest),
      onError: (err) => voice.warnOnce('fleet', `Coordinate replicas: ${err.message}`),
    });
  }

  /** The book whose targets come with the leases, and the wait an inherited START is given. */
  attach(book: ControlBook, settings: Pick<ControlSettings, 'waitMs'>, onShare: () => void): void {
    this.book = book;
    this.waitMs = settings.waitMs;
    this.onShare = onShare;
  }

  /** What the controllers ask: whether they hold the target, its newest wish, and where their memory is kept. */
  deps(): Pick<ControlDeps, 'store' | 'mayCommand' | 'passive' | 'pullWish'> {
    return {
      store: this.store(),
      mayCommand: (t) => this.scope.holds(targetKey(t)),
      passive: (t) => !this.scope.holds(targetKey(t)),
      pullWish: async (t) => {
        const posted = (await this.scope.newest([targetKey(t)])).get(targetKey(t));
        return posted ? parseWish(posted) : null;
      },
    };
  }

  /** A wish from this replica's flow: posted for the holder (maybe this replica), which checks at once if it is here and reports by itself. */
  async want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<ChargingError | undefined> {
    const key = targetKey(target);
    const wish: Omit<PostedWish, 'seq'> = { wanted, force: opts.force === true, restart: opts.restart === true, ...(opts.energyLimit !== undefined ? { energyLimit: opts.energyLimit } : {}) };
    // Posted first, in the order the wishes came (a post tried again while Redis takes no writes keeps its place), then
    // the target joins the list: its holder, new or not, reads the newest wish at its next check.
    const seq = await this.scope.post(key, JSON.stringify(wish));
    await this.scope.add([key]);
    if (seq !== null && this.book?.get(key) && this.scope.holds(key)) this.kick(key, seq);
    return undefined;
  }

  /** Leases given back; a removed node's targets and wishes leave the fleet. */
  close(removed: boolean): Promise<void> {
    return this.scope.close(removed);
  }

  /** The holder's store: a write is a commit that holds only while its lease does (otherwise nothing is sent). */
  private store(): ControlStore {
    return {
      load: () => Promise.resolve([]), // targets come with their leases (changed), not from a load
      save: async (key, kept) => {
        const res = await this.scope.commit(key, kept ?? null);
        if (!res.ok) throw new ChargingError('NETWORK', `Coordinate replicas: could not keep the target's state in Redis (${res.message}); nothing was sent`);
      },
    };
  }

  private changed(change: LeaseChange<KeptTarget>): void {
    const book = this.book;
    if (!book) return;
    for (const r of change.released) {
      book.drop(r.item);
      this.seen.delete(r.item);
    }
    const clocks = { now: monotonicNow(), wall: Date.now() };
    for (const a of change.acquired) {
      const kept = a.saved?.state ? fromKept(a.saved.state, clocks) : null;
      if (kept) fenceInherited(kept.memory, clocks.now, this.waitMs, this.scope.leaseMs);
      const target = kept?.target ?? targetOf(a.item);
      if (target) book.adopt(target, kept?.memory ?? null);
    }
    this.onShare();
  }

  /** After each fleet cycle: a newer wish for a target held here is checked at once rather than at the next interval. */
  private newer(newest: Map<string, Posted>): void {
    for (const [key, posted] of newest) if (this.book?.get(key) && parseWish(posted)) this.kick(key, posted.seq);
  }

  private kick(key: string, seq: number): void {
    if ((this.seen.get(key) ?? 0) >= seq) return;
    this.seen.set(key, seq);
    const control = this.book?.get(key);
    void control?.check('command').then((err) => err && this.voice.report(err, { topic: control.target.token, target: { ...control.target } }));
  }
}

function parseWish(posted: Posted): PostedWish | null {
  try {
    const w = JSON.parse(posted.text) as Partial<PostedWish>;
    if (typeof w.wanted !== 'boolean') return null;
    const limit = typeof w.energyLimit === 'number' && Number.isFinite(w.energyLimit) && w.energyLimit > 0 ? w.energyLimit : w.energyLimit === null ? null : undefined;
    return { seq: posted.seq, wanted: w.wanted, force: w.force === true, restart: w.restart === true, ...(limit !== undefined ? { energyLimit: limit } : {}) };
  } catch {
    return null;
  }
}
