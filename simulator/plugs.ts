/**
 * Which car is at which connector. A connector nobody plugged or unplugged
 * in a test has the simulator's default car (options.powerW, never full):
 * every START brings a session, as before cars were modelled. A car plugged
 * in brings its own power and fullness; a connector whose car left brings no
 * session on START (the station accepts it, nothing starts) until the next
 * car is plugged in.
 */
import { type Car, endlessCar } from './cars';

const key = (locationId: string, evseId: string): string => `${locationId}\u0000${evseId}`;

export class Plugs {
  private readonly cars = new Map<string, Car | null>();

  constructor(private readonly powerW: () => number) {}

  /** The car at the connector; null when it left (no session on START). */
  carAt(locationId: string, evseId: string): Car | null {
    const car = this.cars.get(key(locationId, evseId));
    return car === undefined ? this.defaultCar() : car;
  }

  defaultCar(): Car {
    return endlessCar(this.powerW());
  }

  plugIn(locationId: string, evseId: string, car: Partial<Car> = {}): Car {
    const c = { ...this.defaultCar(), ...car };
    this.cars.set(key(locationId, evseId), c);
    return c;
  }

  unplug(locationId: string, evseId: string): void {
    this.cars.set(key(locationId, evseId), null);
  }

  clear(): void {
    this.cars.clear();
  }
}
