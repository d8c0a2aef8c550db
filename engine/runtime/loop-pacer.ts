// Paces the main thread's event loop while many devices stream (LISTEN_LOOP_PACE_MS): the loop polls its sockets at
// most once per interval, so each poll finds many frames ready instead of one or two.
//
// Rationale: a frame costs the main thread ~2 µs, so under load it went back to epoll after every few frames and
// slept there until the next one came. Counted over 4 s at 400 opus_fs320 sessions (perf stat): 29,632 epoll_pwait
// calls and 7,316 context switches on the main thread, against 7,751 and 3,850 for the bare server, whose inline
// decode keeps it busy longer per wake-up; both made the same 80,400 recv calls. Sleeping out the rest of a 5 ms
// interval once the frames of a poll are handled cut that to 785 calls and 1,468 switches, and the service's CPU per
// session-second by 7% (median of paired 15 s phases in one run, pacing switched on and off; 8% in a run of a
// prototype). A frame waits at most the interval longer; the codec pool holds audio until it fills a 100 ms provider
// message anyway. While paced, the loop is busy or sleeping, never idle in epoll: the sleep is counted
// (listen_loop_paced_seconds_total) so that readers of the loop's busy share can leave it out (engine/app.ts hands
// MainLoad the loop's times without it), and the event-loop delay metrics include it.
import { performance } from 'node:perf_hooks';

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
