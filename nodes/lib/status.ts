import { shortReason } from './errors';

/** Node-RED's status object, without Node-RED. */
export interface NodeStatus {
  fill?: 'red' | 'green' | 'yellow' | 'blue' | 'grey';
  shape?: 'ring' | 'dot';
  text?: string;
}

function clock(now: Date = new Date()): string {
  return now.toTimeString().slice(0, 8);
}

/** The one status vocabulary every node uses: short, with the time of the last change. */
export const Status = {
  clear: (): NodeStatus => ({}),
  requesting: (what: string): NodeStatus => ({ fill: 'blue', shape: 'dot', text: `${what}…` }),
  waiting: (what: string): NodeStatus => ({ fill: 'blue', shape: 'ring', text: what }),
  ok: (text: string): NodeStatus => ({ fill: 'green', shape: 'dot', text: `${text} · ${clock()}` }),
  idle: (text: string): NodeStatus => ({ fill: 'grey', shape: 'ring', text: `${text} · ${clock()}` }),
  warn: (text: string): NodeStatus => ({ fill: 'yellow', shape: 'ring', text }),
  error: (err: unknown): NodeStatus => ({ fill: 'red', shape: 'ring', text: `error: ${shortReason(err)}` }),
};

/** "charging 12.3 kWh" style figure for a badge. */
export function formatKWh(kwh: number | null): string {
  if (kwh === null) return '';
  return kwh >= 100 ? `${kwh.toFixed(0)} kWh` : `${kwh.toFixed(1)} kWh`;
}
