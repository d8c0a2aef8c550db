// "Nothing happened for N ms" on the process scheduler: touch() costs a clock read, not a heap insert, since
// re-scheduling on every frame would leave a cancelled heap entry per frame until it surfaces.
import type { Clock } from '../clock.js';
import type { Scheduler, TimerId } from '../scheduler.js';

export interface InactivityTimerOptions {
  clock: Clock;
  scheduler: Scheduler;
  /** Quiet time that counts as inactivity, in milliseconds. */
  timeoutMs: number;
  /** Called once when `timeoutMs` passed without touch(); the timer is stopped by then. */
  onIdle: () => void;
}

/** One scheduler entry waits for the soonest moment the limit can be reached; early, it re-arms from the last touch. */
export class InactivityTimer {
  readonly #o: InactivityTimerOptions;
  #lastMs: number;
  #id: TimerId | undefined;

  constructor(opts: InactivityTimerOptions) {
    this.#o = opts;
    this.#lastMs = opts.clock.now();
  }

  /** Milliseconds since the last touch (or construction). */
  get idleMs(): number {
    return this.#o.clock.now() - this.#lastMs;
  }

  /** Something happened: the quiet time starts again. */
  touch(): void {
    this.#lastMs = this.#o.clock.now();
  }

  /** Starts watching (idempotent); the quiet time counts from the last touch. */
  start(): void {
    if (this.#id !== undefined) return;
    this.#id = this.#o.scheduler.schedule(this.#lastMs + this.#o.timeoutMs, () => {
      this.#id = undefined;
      if (this.idleMs < this.#o.timeoutMs) this.start();
      else this.#o.onIdle();
    });
  }

  stop(): void {
    this.#o.scheduler.cancel(this.#id);
    this.#id = undefined;
  }
}
