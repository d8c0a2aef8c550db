// The injected clock: everything that reads time or waits goes through one of these, so tests can drive time.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2026, 10, 23, 12, 0, 0)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  /** Moves time forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.#now += ms;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}
