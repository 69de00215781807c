/**
 * The targets of one charging-control node: one controller per (locationId,
 * evseId, token), created by the first wish for it or taken up again from the
 * store when the node starts (a redeploy, a restart).
 */
import { ChargingError } from '../errors';
import { emptyMemory, fromKept, type ControlMemory, type ControlSettings } from './memory';
import type { WishOptions } from './reconcile';
import { TargetController, type ControlDeps } from './controller';
import { targetKey, type ControlTarget } from './view';

/** Targets one node keeps at most: a flow that sends endless new targets meets a clear error, not a slow leak. */
export const MAX_TARGETS = 1000;

export class ControlBook {
  private readonly targets = new Map<string, TargetController>();
  private readonly ready: Promise<void>;
  private closed = false;

  /**
   * `only`: the one target the node can serve (every field set in the node):
   * kept targets other than it (the node's settings changed) are forgotten.
   */
  constructor(
    private readonly settings: ControlSettings,
    private readonly deps: ControlDeps,
    private readonly only?: ControlTarget,
  ) {
    this.ready = this.resume();
  }

  get size(): number {
    return this.targets.size;
  }

  controllers(): IterableIterator<TargetController> {
    return this.targets.values();
  }

  /** Resolves when the kept targets are loaded and their first checks have begun. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  /** A wish for a target; resolves with the failure of the check it caused, if any. */
  async want(target: ControlTarget, wanted: boolean, opts: WishOptions = {}): Promise<ChargingError | undefined> {
    await this.ready;
    if (this.closed) return undefined;
    const key = targetKey(target);
    let control = this.targets.get(key);
    if (!control) {
      if (this.targets.size >= MAX_TARGETS) {
        throw new ChargingError('INVALID_INPUT', `This node already keeps ${MAX_TARGETS} connectors, the most one node keeps: use another charging-control node for more`, { field: 'target' });
      }
      control = new TargetController(target, emptyMemory(), this.settings, this.deps);
      this.targets.set(key, control);
    }
    return control.want(wanted, opts);
  }

  /**
   * Coordinate replicas: this replica now holds the target (its lease), and
   * takes it up from the memory the fleet kept (null: none yet), checking at
   * once. A controller it had is replaced: the fleet's memory is the latest.
   */
  adopt(target: ControlTarget, memory: ControlMemory | null): void {
    if (this.closed) return;
    const key = targetKey(target);
    this.targets.get(key)?.close();
    const control = new TargetController(target, memory ?? emptyMemory(), this.settings, this.deps);
    this.targets.set(key, control);
    void control.check('command').then((err) => err && this.deps.onError(control.target, err));
  }

  /** Coordinate replicas: another replica holds the target now; this one forgets it (the fleet keeps its memory). */
  drop(key: string): void {
    this.targets.get(key)?.close();
    this.targets.delete(key);
  }

  /** The controller of a target this replica holds, if any. */
  get(key: string): TargetController | undefined {
    return this.targets.get(key);
  }

  close(): void {
    this.closed = true;
    for (const c of this.targets.values()) c.close();
  }

  /**
   * Every kept target is checked at once: nothing is sent before progress is
   * read, a command that may have been sent is waited for, an off is carried out.
   */
  private async resume(): Promise<void> {
    let kept: unknown[] = [];
    try {
      kept = await this.deps.store.load();
    } catch (err) {
      this.deps.onError({ locationId: '', evseId: '', token: '' }, err instanceof ChargingError ? err : new ChargingError('INTERNAL', `Could not load the kept state: ${(err as Error)?.message ?? String(err)}`));
    }
    if (this.closed) return;
    const clocks = { now: this.deps.clock.now(), wall: this.deps.clock.wall() };
    const only = this.only && targetKey(this.only);
    for (const raw of kept.slice(0, MAX_TARGETS)) {
      const k = fromKept(raw, clocks);
      if (!k || this.targets.has(targetKey(k.target))) continue;
      if (only && targetKey(k.target) !== only) {
        // Set in the node once, changed since: nothing will ever ask for it again.
        void this.deps.store.save(targetKey(k.target), undefined).catch(() => undefined);
        void this.deps.depot?.release(targetKey(k.target)).catch(() => undefined);
        continue;
      }
      const control = new TargetController(k.target, k.memory, this.settings, this.deps);
      this.targets.set(control.key, control);
      void control.check('command').then((err) => err && this.deps.onError(control.target, err));
    }
  }
}
