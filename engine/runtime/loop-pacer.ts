// Paces the main thread's event loop while many devices stream: it polls its sockets at most once per interval, so
// each poll finds many frames ready instead of waking (and switching threads) for every one or two.
import { performance } from 'node:perf_hooks';

/** Milliseconds between polls while paced: a frame waits at most this longer, far less than the message it fills. */
export const LOOP_PACE_MS = 5;

/** How often the service has the pacer look at the frame rate (LoopPacer.look()), in milliseconds. */
export const PACER_LOOK_MS = 50;

export interface LoopPacerOptions {
  /** Milliseconds between two polls while paced; 0 turns pacing off. */
  intervalMs: number;
  /**
   * Frames per interval at or above which the loop is paced; below it the loop sleeps in epoll as usual (with few
   * frames per interval a paced loop would wake more often than they do).
   * @defaultValue 8
   */
  minFrames?: number;
  /** Test seam: milliseconds on a monotonic clock. @defaultValue performance.now */
  now?: () => number;
  /** Test seam: blocks the thread for `ms` milliseconds. @defaultValue Atomics.wait on a private word */
  sleep?: (ms: number) => void;
  /** Test seam: runs `fn` after the loop's next poll. @defaultValue setImmediate */
  defer?: (fn: () => void) => void;
}

/**
 * While paced the loop is busy or sleeping, never idle in epoll: `sleptMs` is exposed so readers of the loop's busy
 * share can leave the sleeps out (engine/app.ts hands MainLoad the loop's times without them).
 */
export class LoopPacer {
  readonly #intervalMs: number;
  readonly #minFrames: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => void;
  readonly #defer: (fn: () => void) => void;
  /** Frames noted since the count was last read, and when that was. */
  #frames = 0;
  #countedAt: number;
  /** When the paced loop last woke (its sleep ended, or it had no need to sleep). */
  #wokeAt = 0;
  #paced = false;
  #closed = false;
  /** Milliseconds slept, over the pacer's life. */
  sleptMs = 0;
  /** Times the loop went from free to paced. */
  starts = 0;

  constructor(options: LoopPacerOptions) {
    if (!(options.intervalMs >= 0)) throw new RangeError('intervalMs must be 0 or more');
    this.#intervalMs = options.intervalMs;
    this.#minFrames = options.minFrames ?? 8;
    this.#now = options.now ?? (() => performance.now());
    this.#sleep = options.sleep ?? sleepOnWord();
    this.#defer = options.defer ?? ((fn) => void setImmediate(fn));
    this.#countedAt = this.#now();
  }

  /** Whether the loop is paced now. */
  get paced(): boolean {
    return this.#paced;
  }

  /** One frame in from a device. */
  note(): void {
    this.#frames++;
  }

  /**
   * Reads the frame rate since the last look and starts pacing when it is high enough. Called periodically (the
   * scheduler's tick); does nothing while paced (the paced loop watches the rate itself).
   */
  look(): void {
    if (this.#paced || this.#closed || this.#intervalMs === 0) return;
    const now = this.#now();
    const frames = this.#frames;
    const elapsed = now - this.#countedAt;
    this.#frames = 0;
    this.#countedAt = now;
    if (elapsed <= 0 || (frames * this.#intervalMs) / elapsed < this.#minFrames) return;
    this.#paced = true;
    this.#wokeAt = now;
    this.starts++;
    this.#defer(this.#pace);
  }

  /** Ends pacing for good (shutdown). */
  close(): void {
    this.#closed = true;
  }

  /** Runs once per loop turn while paced: sleeps out the rest of the interval, or stops pacing when frames are few. */
  readonly #pace = (): void => {
    const now = this.#now();
    // Frames counted since the last turn began: those its poll found (they came while it slept) and its work's.
    const few = now - this.#countedAt >= this.#intervalMs && this.#frames < this.#minFrames;
    this.#frames = 0;
    this.#countedAt = now;
    if (this.#closed || few) {
      this.#paced = false;
      return;
    }
    const rest = this.#intervalMs - (now - this.#wokeAt);
    if (rest > 0) {
      this.#sleep(rest);
      const woke = this.#now();
      // What it slept, not what it asked for: a busy host wakes the thread late, and that time was not work either.
      this.sleptMs += woke - now;
      this.#wokeAt = woke;
    } else this.#wokeAt = now;
    this.#defer(this.#pace);
  };
}

function sleepOnWord(): (ms: number) => void {
  const word = new Int32Array(new SharedArrayBuffer(4));
  return (ms) => void Atomics.wait(word, 0, 0, ms);
}
