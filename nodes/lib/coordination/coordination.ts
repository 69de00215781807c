/**
 * The one seam between the nodes and *Coordinate replicas* (docs/fleet.md,
 * docs/architecture.md). A configuration node hands every node using it a
 * Coordination: LocalCoordination (local.ts) when the process is alone, which
 * sends at once, holds every token and target and keeps state where the node
 * keeps it; the Redis one (nodes/lib/fleet/coordination.ts) when replicas
 * share the work. A node never asks which it has.
 *
 * Five capabilities: a START/STOP claimed once (`commands`), the token and the
 * request budget the client shares (`clientHooks`), a watch node's list
 * (`watch`: which tokens this process polls, its state committed before an
 * event goes out), and a control node's targets (`control`: which connectors
 * this process commands, its memory and the wishes of every replica).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { ControlBook } from '../control/book';
import type { ControlDeps } from '../control/controller';
import type { ControlSettings } from '../control/memory';
import type { WishOptions } from '../control/reconcile';
import type { ControlStore } from '../control/store';
import type { ControlTarget } from '../control/view';
import type { ChargingError } from '../errors';
import type { Claims } from './claims';
import type { GrantPool, GrantStore } from './grants';
import type { ChargingCommand } from '../session/commands';
import type { SavedState, SessionWatcher, WatcherOptions } from '../session/watcher';

/** A command's outcome as its sender published it: the result, or the error as ChargingError.toJSON wrote it. */
export type CommandOutcome<T> = { ok: true; result: T } | { ok: false; error: Record<string, unknown> };

/** What a command's run came to: sent here, sent by another replica (its outcome), or not known. */
export type CommandRun<T> =
  | { role: 'sent'; deduplicated: boolean; result: T; /** the replica that sent it, when replicas share the work */ sender?: string }
  | { role: 'duplicate'; from: string; outcome: CommandOutcome<T> }
  | { role: 'unknown'; from: string | null; reason: 'timeout' | 'sender-gone' | 'redis-unavailable'; message: string };

export interface CommandShare {
  /**
   * Runs `send` here, or passes on the outcome of the replica that claimed the
   * same command. `longestMs`: how long the whole operation may take (the
   * claim outlives it, the others wait as long). `unshared`: said when the
   * command goes out without a claim (Redis away).
   */
  run<T>(command: ChargingCommand, send: () => Promise<T>, longestMs: number, unshared: (err: ChargingError) => void): Promise<CommandRun<T>>;
}

/** How a share speaks through its node: a warning once per key, an error for Catch. */
export interface ShareVoice {
  warnOnce(key: string, text: string): void;
  report(err: unknown, about?: { topic: string; target?: ControlTarget }): void;
}

/** What a watch node shows of the fleet: its share and the whole list, or that Redis is away. */
export type WatchView = { up: true; count: number; total: number } | { up: false; count: number };

export interface WatchShareOptions {
  voice: ShareVoice;
  /** the badge: called when the share or Redis's health changes (alone: never) */
  show(view: WatchView): void;
  /** one progress query of a token: how a replica that gave its share away finds the service again */
  probe(token: string): Promise<unknown>;
}

/** A watch node's list: which tokens this process polls, and where a poll's change is committed. */
export interface WatchShare {
  /** what the watcher asks before each poll and after each change */
  watcherOptions(): Pick<WatcherOptions, 'mayPoll' | 'commit' | 'onPolled'>;
  /** the watcher that polls this process's share; `onShare` after every gain or loss */
  attach(watcher: SessionWatcher, onShare: () => void): void;
  /** the node's tokens after a (re)start, with the states kept in context (alone: the seeds; shared: only where Redis has none) */
  resume(tokens: string[], kept: (token: string) => SavedState | undefined): void;
  watch(tokens: string[]): void;
  unwatch(tokens: string[]): void;
  unwatchAll(): void;
  /** every token on the list, this process's or not: the poll demand the budget is sized for */
  readonly total: number;
  close(removed: boolean): Promise<void>;
}

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

export interface Coordination {
  readonly commands: CommandShare;
  /** work done once per key by the fleet (claims.ts); alone, at once */
  readonly claims: Claims;
  /** what the ServiceClient shares: the token and the request budget (alone: nothing) */
  clientHooks(): FleetHooks | undefined;
  watch(scope: string, options: WatchShareOptions): WatchShare;
  control(scope: string, voice: ShareVoice, local: LocalControlStore): ControlShare;
  /**
   * The pool of grants named `pool` (a depot: grants.ts), shared by every
   * caller that names it; alone kept in `local`. A Coordination without it
   * answers unavailable (no grant, so no START): grantsOf() in grants.ts.
   */
  grants?(pool: string, local: GrantStore): GrantPool;
}
