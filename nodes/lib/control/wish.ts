/**
 * The wanted state a flow sends to charging-control in msg.payload: what
 * power-saver's outputs, a Dashboard 2.0 switch, a Home Assistant switch or an
 * MQTT on/off send, and nothing else (a guess would start or stop a car).
 */
import { ChargingError } from '../errors';

const ON = new Set(['on', 'start', 'true', '1']);
const OFF = new Set(['off', 'stop', 'false', '0']);

/** true (charge) or false (do not charge); anything else is INVALID_INPUT, and nothing is sent. */
export function parseWanted(payload: unknown): boolean {
  if (payload === true || payload === 1) return true;
  if (payload === false || payload === 0) return false;
  if (typeof payload === 'string') {
    const word = payload.trim().toLowerCase();
    if (ON.has(word)) return true;
    if (OFF.has(word)) return false;
  }
  throw new ChargingError('INVALID_INPUT', `msg.payload must say the wanted state: true/false, "on"/"off", 1/0 or "START"/"STOP" (got ${describe(payload)})`, { field: 'payload' });
}

function describe(v: unknown): string {
  if (typeof v === 'string') return `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  if (typeof v === 'number') return String(v);
  if (v === null) return 'null';
  return Array.isArray(v) ? 'an array' : typeof v;
}
