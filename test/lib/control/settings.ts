/** charging-control's settings for the tests: the node's defaults in ms, with what a test changes. */
import type { ControlSettings } from '../../../nodes/lib/control/memory';

export function controlSettings(changes: Partial<ControlSettings> = {}): ControlSettings {
  return { guardMs: 300_000, checkMs: 30_000, confirmMs: 2_000, waitMs: 60_000, startAttempts: 2, stopAttempts: 3, enforce: false, retryMs: 600_000, onDelayMs: 0, offDelayMs: 0, energyLimitKWh: null, ...changes };
}
