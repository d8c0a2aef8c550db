// Whether the main thread has room for one more session's decoding, asked by the codec pool at each open: a session
// decoded there costs no thread hop, but a busy main thread delays every session's frames (engine/codec/pool.ts).
import { performance } from 'node:perf_hooks';
import type { Clock } from '../clock.js';

/** Cumulative milliseconds the event loop was idle and active, as performance.eventLoopUtilization() counts them. */
export interface LoopTimes {
  idle: number;
  active: number;
}

/**
 * The share (0-1) of the time between two readings of a loop's times that it was active; undefined when no time
 * passed between them, or when they went back (a thread that replaced a crashed one counts from zero again).
 */
export function busyShare(before: LoopTimes, after: LoopTimes): number | undefined {
  const active = after.active - before.active;
  const idle = after.idle - before.idle;
  return active >= 0 && idle >= 0 && active + idle > 0 ? active / (active + idle) : undefined;
}

export interface MainLoadOptions {
  /** Share of the main thread's time (0-1) below which it takes new sessions. 0: it takes none. */
  limit: number;
  clock: Clock;
  /** The loop's cumulative times; tests pass their own. @defaultValue performance.eventLoopUtilization() */
  read?: () => LoopTimes;
  /** Milliseconds between two readings of the loop's busy share. @defaultValue 1000 */
  periodMs?: number;
  /**
   * Least share of the main thread one more session is reckoned to take, before its load can be read (a burst of
   * opens within one period).
   * @defaultValue 0.002
   */
  minSessionShare?: number;
}

/**
 * A session stays on the thread it was opened on (its decoders keep state), so the main thread takes new ones only
 * while it was busy less than `limit` of the last period, and no more at once than that room allows.
 */
export class MainLoad {
  readonly #limit: number;
  readonly #clock: Clock;
  readonly #read: () => LoopTimes;
  readonly #periodMs: number;
  readonly #minShare: number;
  #last: LoopTimes;
  #lastAt: number;
  /** Busy share over the last period read. */
  #busy = 0;
  /** What one more session is reckoned to add, and the sessions taken since the last reading. */
  #perSession: number;
  #taken = 0;

  constructor(options: MainLoadOptions) {
    if (!(options.limit >= 0 && options.limit <= 1)) throw new RangeError('limit must be between 0 and 1');
    this.#limit = options.limit;
    this.#clock = options.clock;
    this.#read = options.read ?? (() => performance.eventLoopUtilization());
    this.#periodMs = options.periodMs ?? 1000;
    this.#minShare = options.minSessionShare ?? 0.002;
    this.#perSession = this.#minShare;
    this.#last = this.#read();
    this.#lastAt = this.#clock.now();
  }

  /** The busy share (0-1) of the last period read. */
  get busy(): number {
    return this.#busy;
  }

  /**
   * True when the main thread takes one more session (and counts it taken). `sessions`: the sessions it already
   * serves (all of them receive there), to reckon one more's share from the load they make.
   */
  admit(sessions: number): boolean {
    if (this.#limit === 0) return false;
    const now = this.#clock.now();
    if (now - this.#lastAt >= this.#periodMs) {
      const t = this.#read();
      this.#busy = busyShare(this.#last, t) ?? this.#busy;
      this.#last = t;
      this.#lastAt = now;
      this.#taken = 0;
      this.#perSession = Math.max(this.#minShare, sessions > 0 ? this.#busy / sessions : 0);
    }
    if (this.#busy + (this.#taken + 1) * this.#perSession > this.#limit) return false;
    this.#taken++;
    return true;
  }
}
