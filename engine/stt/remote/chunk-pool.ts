// Recycles the fixed-length PCM messages a remote stream fills and sends.
//
// Rationale: a 100 ms message (3.2 KB) is filled over 100 ms, long enough for a fresh array to outlive V8's young
// generation and die in the old one. When streams also kept each message until a final result covered it (1-3 s),
// that was some 8 MB/s of promoted garbage at 250 sessions that only a full collection freed. Recycled arrays never
// die.

export class PcmChunkPool {
  /** Samples per pooled array: the engine's message length. */
  readonly samples: number;
  #max: number;
  readonly #free: Int16Array[] = [];

  /**
   * @param samples the message length in samples; other lengths are allocated, never pooled
   * @param maxFree arrays kept for reuse at most (what is given back beyond it is dropped); see `maxFree`
   */
  constructor(samples: number, maxFree: number) {
    this.samples = samples;
    this.#max = maxFree;
  }

  /** Arrays waiting for reuse. */
  get free(): number {
    return this.#free.length;
  }

  /** Arrays kept for reuse at most. */
  get maxFree(): number {
    return this.#max;
  }

  /**
   * Moves the cap with the load (the owner sets it from its open streams): too low a cap drops arrays a moment
   * before they are needed again, and those die old, which is what the pool is for avoiding. Lowering it frees the
   * spare arrays beyond the new cap at once, so a quiet node gives back what a busy spell took.
   */
  set maxFree(n: number) {
    this.#max = n;
    if (this.#free.length > n) this.#free.length = n;
  }

  /** An array of `samples` samples (contents undefined: the caller fills it). */
  take(): Int16Array {
    return this.#free.pop() ?? new Int16Array(this.samples);
  }

  /**
   * Hands back an array from take(), or a view of one (a shorter message is a view of a pooled array); the caller
   * must not touch it after. Arrays the pool did not make are ignored.
   */
  give(chunk: Int16Array): void {
    if (chunk.buffer.byteLength !== this.samples * 2 || this.#free.length >= this.#max) return;
    this.#free.push(chunk.byteOffset === 0 && chunk.length === this.samples ? chunk : new Int16Array(chunk.buffer));
  }
}
