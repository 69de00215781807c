/**
 * The figures read at scrape time (a gauge is never updated on a request):
 * each node that holds one registers a reader with its configuration's
 * metrics and takes it away when it closes. A reader that throws, or a
 * figure it leaves out, is left out of the exposition: never a made-up 0.
 */
import type { ControlState } from '../control/memory';
import type { CoordinationFigures } from '../coordination/coordination';

export type { CoordinationFigures };

/** A watch node: the tokens it polls here, and those whose session has started and not ended. */
export interface WatchFigures {
  watched: number;
  charging: number;
}

/** A control node: its connectors by the state each is in. */
export type ControlFigures = Partial<Record<ControlState, number>>;

/** A charging-depot, as its last table showed it (its label: the depot's name, or its id); a limit not set is left out. */
export interface DepotFigures {
  depot: string;
  inUse: number;
  waiting: number;
  usedKW: number;
  limit?: number;
  budgetKW?: number;
}

/** Every kind of reader. */
export interface Figures {
  watch: WatchFigures;
  control: ControlFigures;
  coordination: CoordinationFigures;
  depot: DepotFigures;
}

export type FigureKind = keyof Figures;
export const FIGURE_KINDS: readonly FigureKind[] = ['watch', 'control', 'coordination', 'depot'];

/** What one scrape read: per configuration label and kind, each reader's figures, or null when a reader failed. */
export type Snapshot = Map<string, { [K in FigureKind]?: Array<Figures[K]> | null }>;
