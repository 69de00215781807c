/**
 * What the depot's runtime tests share: a depot and a control node serving
 * many connectors (msg.target), compressed time, every output kept with the
 * moment it came, and the commands counted where they land (the simulator).
 */
import { Sink, type FlowNode } from '../harness';
import { SESSIONS_PATH, type ChargingServiceSimulator } from '../../simulator/simulator';

export const LOC = 'DEPOT-LOC';
export const target = (n: number) => ({ locationId: LOC, evseId: String(n), token: `DEP-${n}` });
export type Target = ReturnType<typeof target>;

export const SINKS: FlowNode[] = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
export const CATCH: FlowNode = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

export function depot(extra: Record<string, unknown> = {}): FlowNode {
  return { id: 'dep', type: 'charging-depot', limit: 2, minRun: 1, turn: 0, aging: 3600, idleKWh: 0, idleWindow: 0, overFor: 1, ...extra };
}

export function control(extra: Record<string, unknown> = {}): FlowNode {
  return { id: 'ctl', type: 'charging-control', service: 'svc', depot: 'dep', locationId: '', evseId: '', token: '', guard: 0, checkInterval: 0.3, waitTimeout: 1, startAttempts: 2, retryInterval: 600, wires: [['out']], ...extra };
}

/** Every output of the control node with the moment it came (performance.now()). */
export class Outputs {
  readonly all: Array<{ at: number; msg: Record<string, unknown> }> = [];

  constructor(id = 'out') {
    Sink.of(id).node.on('input', (msg: Record<string, unknown>) => this.all.push({ at: performance.now(), msg }));
  }

  of(t: Target): Array<Record<string, unknown>> {
    return this.all.filter((o) => (o.msg.target as Target | undefined)?.token === t.token).map((o) => o.msg);
  }

  states(t: Target): unknown[] {
    return this.of(t).map((m) => m.payload);
  }

  last(t: Target): Record<string, unknown> | undefined {
    return this.of(t).at(-1);
  }

  /** When target t first showed `state` (performance.now()), or undefined. */
  when(t: Target, state: string, after = -Infinity): number | undefined {
    return this.all.find((o) => o.at > after && (o.msg.target as Target).token === t.token && o.msg.payload === state)?.at;
  }
}

export const caught = () => Sink.of('caught').messages.map((m) => m.error as { code: string; message: string });

/** The commands that arrived at the service, in order: action, token, when (simulator clock). */
export function commands(sim: ChargingServiceSimulator): Array<{ action: string; token: string; at: number }> {
  return sim.requests.filter((r) => r.method === 'POST' && r.path === SESSIONS_PATH).map((r) => {
    const b = JSON.parse(r.body) as { action: string; token: string };
    return { action: b.action, token: b.token, at: r.at };
  });
}

export const startsOf = (sim: ChargingServiceSimulator, t: Target) => sim.arrivals('START', `${t.token}|${t.locationId}|${t.evseId}`);
export const depotSessions = (s: { locationId: string }) => s.locationId === LOC;
