/**
 * The car behind a session: how much power it draws and when it is full.
 * A car draws its full power until the last `taperWh` before full, then its
 * power falls linearly in time to 0 W, and it stays at 0 W once full (a full
 * car keeps its session until someone ends it). Energy is the integral of
 * power, so the meter a progress record shows and the power a reader
 * estimates from two readings agree exactly.
 */

export interface Car {
  /** the most it draws, W */
  powerW: number;
  /** energy from the session's start until full, Wh (Infinity: never full, the simulator's default) */
  needWh: number;
  /** the last Wh before full, drawn with power falling linearly to 0 (0: full power until full) */
  taperWh: number;
}

/** A car that draws `powerW` for ever: every session before cars were modelled. */
export function endlessCar(powerW: number): Car {
  return { powerW, needWh: Infinity, taperWh: 0 };
}

const H = 3_600_000;

/** When the taper begins (ms after the start) and how long it lasts, ms. */
function phases(car: Car): { fullPowerMs: number; taperMs: number } {
  if (car.powerW <= 0) return { fullPowerMs: Infinity, taperMs: 0 };
  const taper = Math.min(Math.max(0, car.taperWh), car.needWh);
  return { fullPowerMs: ((car.needWh - taper) / car.powerW) * H, taperMs: ((2 * taper) / car.powerW) * H };
}

/** Energy drawn `ms` after the session's start, Wh (not rounded). */
export function energyWh(car: Car, ms: number): number {
  const t = Math.max(0, ms);
  if (car.powerW <= 0) return 0;
  const { fullPowerMs, taperMs } = phases(car);
  if (t <= fullPowerMs) return (t / H) * car.powerW;
  const start = (fullPowerMs / H) * car.powerW;
  if (taperMs <= 0) return start;
  const tau = Math.min(t - fullPowerMs, taperMs);
  // P(τ) = P (1 − τ/T): E = P (τ − τ²/2T)
  return start + (car.powerW * (tau - (tau * tau) / (2 * taperMs))) / H;
}

/** Power drawn `ms` after the session's start, W (0 once full). */
export function powerAt(car: Car, ms: number): number {
  const t = Math.max(0, ms);
  const { fullPowerMs, taperMs } = phases(car);
  if (t < fullPowerMs) return Math.max(0, car.powerW);
  if (t >= fullPowerMs + taperMs) return 0;
  return car.powerW * (1 - (t - fullPowerMs) / taperMs);
}

/** ms after the start when the car is full (Infinity: never). */
export function fullAfterMs(car: Car): number {
  const { fullPowerMs, taperMs } = phases(car);
  return fullPowerMs + taperMs;
}
