/**
 * A control node's targets with *Coordinate replicas*: the node's side of
 * FleetControlShare. Targets come and go with their leases (the holder takes
 * each up from the memory the fleet kept); a wish is posted to the fleet, and
 * the holder applies it at a check, which it runs as soon as it sees a newer
 * wish (read once per fleet cycle for the targets it holds). Only the holder
 * reads progress, sends and reports, so a target's messages come out of one
 * replica.
 */
import { monotonicNow } from '../clock';
import type { ControlBook } from '../control/book';
import type { ControlDeps } from '../control/controller';
import { fromKept, type ControlSettings } from '../control/memory';
import type { WishOptions } from '../control/reconcile';
import { targetKey, targetOf, type ControlTarget } from '../control/view';
import type { ControlShare, ShareVoice } from '../coordination/coordination';
import type { ChargingError } from '../errors';
import { fenceInherited, FleetControlShare, type FleetWish } from './control-share';
import type { Fleet } from './fleet';

export class FleetControlLink implements ControlShare {
  readonly share: FleetControlShare;
  private book: ControlBook | null = null;
  private waitMs = 0;
  private onShare: () => void = () => undefined;
  private readonly seen = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly fleet: Fleet,
    scope: string,
    private readonly voice: ShareVoice,
  ) {
    this.share = new FleetControlShare(fleet, scope, {
      onChange: (change) => {
        const book = this.book;
        if (!book) return;
        for (const r of change.released) {
          book.drop(r.token);
          this.seen.delete(r.token);
        }
        const clocks = { now: monotonicNow(), wall: Date.now() };
        for (const a of change.acquired) {
          const kept = a.saved?.state ? fromKept(a.saved.state, clocks) : null;
          if (kept) fenceInherited(kept.memory, clocks.now, this.waitMs, this.fleet.leaseMs);
          const target = kept?.target ?? targetOf(a.token);
          if (target) book.adopt(target, kept?.memory ?? null);
        }
        this.onShare();
      },
      onError: (err) => voice.warnOnce('fleet', `Coordinate replicas: ${err.message}`),
    });
    this.timer = setInterval(() => void this.lookForWishes(), fleet.cycleMs);
    this.timer.unref?.();
  }

  /** The book whose targets come with the leases, and the wait an inherited START is given (absent: none, the longest hold). */
  attach(book: ControlBook, settings?: Pick<ControlSettings, 'waitMs'>, onShare: () => void = () => undefined): void {
    this.book = book;
    this.waitMs = settings?.waitMs ?? 0;
    this.onShare = onShare;
  }

  /** What the controllers ask the fleet: whether they hold the target, its newest wish, and where their memory is kept. */
  deps(): Pick<ControlDeps, 'store' | 'mayCommand' | 'passive' | 'pullWish'> {
    return {
      store: this.share.store(),
      mayCommand: (t) => this.share.holds(targetKey(t)),
      passive: (t) => !this.share.holds(targetKey(t)),
      pullWish: async (t) => (await this.share.wishes([targetKey(t)])).get(targetKey(t)) ?? null,
    };
  }

  /** A wish from this replica's flow: posted for the holder (maybe this replica), which checks at once if it is here and reports by itself. */
  async want(target: ControlTarget, wanted: boolean, opts: WishOptions): Promise<ChargingError | undefined> {
    const key = targetKey(target);
    await this.share.add(key);
    const seq = await this.share.post(key, { wanted, force: opts.force === true, restart: opts.restart === true, ...(opts.energyLimit !== undefined ? { energyLimit: opts.energyLimit } : {}) });
    const control = this.book?.get(key);
    if (control && this.share.holds(key)) this.kick(key, seq);
    return undefined;
  }

  close(removed: boolean): Promise<void> {
    clearInterval(this.timer);
    return this.share.close(removed);
  }

  /** Once per fleet cycle: a newer wish for a target held here is checked at once rather than at the next interval. */
  private async lookForWishes(): Promise<void> {
    const book = this.book;
    if (!book) return;
    const held = this.share.own.owned().filter((k) => book.get(k));
    const wishes = await this.share.wishes(held);
    for (const [key, wish] of wishes) if (wish) this.kick(key, wish.seq);
  }

  private kick(key: string, seq: FleetWish['seq']): void {
    if ((this.seen.get(key) ?? 0) >= seq) return;
    this.seen.set(key, seq);
    const control = this.book?.get(key);
    void control?.check('command').then((err) => err && this.voice.report(err, { topic: control.target.token, target: { ...control.target } }));
  }
}
