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

/**
 * msg.energyLimit with a wish: kWh (a positive number, or a numeric string),
 * null or 0 for no limit, undefined when the message has none (the node's
 * setting applies). Anything else is INVALID_INPUT.
 */
export function parseEnergyLimit(v: unknown): number | null | undefined {
  if (v === undefined) return undefined;
  if (v === null || v === 0 || v === '0' || v === '') return null;
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v.trim()) : NaN;
  if (Number.isFinite(n) && n > 0 && n <= 10_000) return n;
  throw new ChargingError('INVALID_INPUT', `msg.energyLimit must be a number of kWh above 0 (up to 10000), or null/0 for no limit (got ${describe(v)})`, { field: 'energyLimit' });
}
