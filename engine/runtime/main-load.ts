// Whether the main thread has room for one more session's decoding: the codec pool asks at each open
// (CODEC_INLINE_BUSY_PCT; engine/codec/pool.ts CodecPoolOptions.inline).
//
// Rationale: a session decoded on the main thread costs no thread hop: at 200 opus_fs320 sessions on 2 vCPUs, all of
// them decoded there cost 0.43-0.45 cores against 0.47-0.52 with the two codec shards, at the same or lower frame
// latency. But a busy main thread delays every session's frames, those of the shards' sessions too: at 450 sessions
// all decoded there, the main thread's event-loop p99 was 30 ms against 18 and frame p50 11 ms against 7. A session
// stays on the thread it was opened on (its decoders keep state), so the main thread takes new sessions only while it
// was busy less than a set share of the last second, and no more at once than that share's room allows. Even so, on
// 2 vCPUs capacity ramps held 425 sessions with a 25% share against 500 without, so engine/config.ts turns it on by
// default only on one CPU (there, at 100 sessions, it cost 16-21% less CPU).
import { performance } from 'node:perf_hooks';
import type { Clock } from '../clock.js';

/** Cumulative milliseconds the event loop was idle and active, as performance.eventLoopUtilization() counts them. */
export interface LoopTimes {
  idle: number;
  active: number;
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
   * @defaultValue 0.002 (with 200 opus_fs320 sessions decoded there the process took ~0.43 cores)
   */
  minSessionShare?: number;
}

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
      const active = t.active - this.#last.active;
      const total = active + (t.idle - this.#last.idle);
      if (total > 0) this.#busy = active / total;
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
