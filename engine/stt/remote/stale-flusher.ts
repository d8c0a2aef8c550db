// One repeating scheduler entry that flushes audio left waiting in remote streams' send buffers (a device paused).
//
// Rationale: a stream sends once a message's worth of audio is buffered, so a steady stream never needs a timer; only
// a pause leaves a short rest behind. Rather than a timer per stream, streams with a rest register here; a stream
// still holding a rest it already held at the previous tick sends it. The entry exists only while streams are
// registered. A streaming stream holds a rest nearly all the time (each message's first audio starts the next), so it
// stays registered between messages and leaves only at a tick that finds it without one. Registering at every rest and
// leaving at every send made the set grow and shrink ten times a second per stream: its reallocated hash tables were
// the largest single source of promoted garbage on the main thread at 450 streaming sessions (0.22 of 1.36 MB/s).
import type { Scheduler, TimerId } from '../../scheduler.js';

export interface StaleFlushable {
  /**
   * The flusher's tick: the stream sends a rest it already held at the previous tick. Answers whether it still wants
   * ticks (false: it holds no rest and leaves; it registers again with its next rest).
   */
  tickStale(): boolean;
}

export class StaleFlusher {
  readonly #scheduler: Scheduler;
  readonly #periodMs: number;
  readonly #streams = new Set<StaleFlushable>();
  #timer: TimerId | undefined;

  constructor(scheduler: Scheduler, periodMs: number) {
    this.#scheduler = scheduler;
    this.#periodMs = periodMs;
  }

  /** Streams registered now. */
  get size(): number {
    return this.#streams.size;
  }

  /** `stream` holds a rest; it gets ticks until it answers false (idempotent). */
  hold(stream: StaleFlushable): void {
    this.#streams.add(stream);
    this.#timer ??= this.#scheduler.every(this.#periodMs, () => this.#tick());
  }

  /** `stream` leaves for good (it closed or failed). */
  release(stream: StaleFlushable): void {
    this.#streams.delete(stream);
    this.#stopIfEmpty();
  }

  #tick(): void {
    for (const stream of this.#streams) if (!stream.tickStale()) this.#streams.delete(stream);
    this.#stopIfEmpty();
  }

  #stopIfEmpty(): void {
    if (this.#streams.size === 0 && this.#timer !== undefined) {
      this.#scheduler.cancel(this.#timer);
      this.#timer = undefined;
    }
  }
}
