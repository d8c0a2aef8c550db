// The tail of a remote stream's audio not yet covered by final results, kept (bounded) so a failed stream loses nothing.
//
// Chunks are kept by reference (write() hands them over) and dropped from the front as the provider acknowledges
// audio; past `maxSamples` the oldest audio goes first, so memory per stream is bounded whatever the provider does.
import type { UnacknowledgedAudio } from './types.js';

export class UnacknowledgedBuffer {
  readonly #sampleRateHz: number;
  readonly #maxSamples: number;
  #chunks: Int16Array[] = [];
  /** Stream sample index of the first retained sample. */
  #first = 0;
  #retained = 0;
  #written = 0;

  constructor(sampleRateHz: number, maxSamples: number) {
    this.#sampleRateHz = sampleRateHz;
    this.#maxSamples = maxSamples;
  }

  /** Samples written since the stream started. */
  get writtenSamples(): number {
    return this.#written;
  }

  push(pcm: Int16Array): void {
    if (pcm.length === 0) return;
    this.#chunks.push(pcm);
    this.#retained += pcm.length;
    this.#written += pcm.length;
    if (this.#retained > this.#maxSamples) this.#dropBefore(this.#written - this.#maxSamples);
  }

  /** The provider covered everything before stream sample `sample`. */
  acknowledge(sample: number): void {
    this.#dropBefore(Math.min(sample, this.#written));
  }

  snapshot(): UnacknowledgedAudio {
    const pcm = new Int16Array(this.#retained);
    let at = 0;
    for (const c of this.#chunks) {
      pcm.set(c, at);
      at += c.length;
    }
    return { startS: this.#first / this.#sampleRateHz, pcm };
  }

  #dropBefore(sample: number): void {
    while (this.#first < sample && this.#chunks.length > 0) {
      const head = this.#chunks[0]!;
      const cut = sample - this.#first;
      if (cut >= head.length) {
        this.#chunks.shift();
        this.#first += head.length;
        this.#retained -= head.length;
      } else {
        this.#chunks[0] = head.subarray(cut);
        this.#first += cut;
        this.#retained -= cut;
      }
    }
  }
}
