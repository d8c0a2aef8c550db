// One repeating scheduler entry that flushes audio left waiting in remote streams' send buffers (a device paused).
//
// Rationale: a stream sends once a message's worth of audio is buffered, so a steady stream never needs a timer; only
// a pause leaves a short rest behind. Rather than a timer per stream, streams with a rest register here; a stream
// still holding a rest it already held at the previous tick sends it. The entry exists only while a stream waits.
import type { Scheduler, TimerId } from '../scheduler.js';

export interface StaleFlushable {
  /** Sends the buffered rest now. */
  flushStale(): void;
}

export class StaleFlusher {
  readonly #scheduler: Scheduler;
  readonly #periodMs: number;
  /** Streams with a rest, and whether they already had it at the previous tick. */
  readonly #waiting = new Map<StaleFlushable, boolean>();
  #timer: TimerId | undefined;

  constructor(scheduler: Scheduler, periodMs: number) {
    this.#scheduler = scheduler;
    this.#periodMs = periodMs;
  }

  /** `stream` now holds a rest (idempotent). */
  hold(stream: StaleFlushable): void {
    if (this.#waiting.has(stream)) return;
    this.#waiting.set(stream, false);
    this.#timer ??= this.#scheduler.every(this.#periodMs, () => this.#tick());
  }

  /** `stream` sent or dropped its rest. */
  release(stream: StaleFlushable): void {
    this.#waiting.delete(stream);
    if (this.#waiting.size === 0 && this.#timer !== undefined) {
      this.#scheduler.cancel(this.#timer);
      this.#timer = undefined;
    }
  }

  #tick(): void {
    for (const [stream, seen] of this.#waiting) {
      if (seen) stream.flushStale();
      else this.#waiting.set(stream, true);
    }
  }
}
