// The last seconds of one session's decoded PCM, kept in the codec thread that decoded it, for speaker identification:
// clips are copied out on request, so the session's audio does not cross to the main thread for every batch.

/** The stream ranges [from, to) given as pairs, each clamped to [start, end) (empty ones left out), and their samples in all. */
export function clampedSpans(ranges: readonly number[], start: number, end: number): { spans: [number, number][]; total: number } {
  const spans: [number, number][] = [];
  let total = 0;
  for (let i = 0; i + 1 < ranges.length; i += 2) {
    const from = Math.max(start, Math.floor(ranges[i]!));
    const to = Math.min(end, Math.floor(ranges[i + 1]!));
    if (to <= from) continue;
    spans.push([from, to]);
    total += to - from;
  }
  return { spans, total };
}

/** A ring of 16 kHz samples addressed by stream position (samples since the session's first audio). */
export class PcmWindow {
  readonly #ring: Int16Array;
  /** Stream position of the first sample written (nothing before it was kept). */
  readonly #first: number;
  /** Stream position of the next sample written. */
  #end: number;

  /** @param samples how much the ring holds; @param position the stream position of the first sample written. */
  constructor(samples: number, position: number) {
    if (!Number.isInteger(samples) || samples <= 0) throw new RangeError('a window holds at least one sample');
    this.#ring = new Int16Array(samples);
    this.#first = position;
    this.#end = position;
  }

  /** Stream position of the oldest sample still held. */
  get start(): number {
    return Math.max(this.#first, this.#end - this.#ring.length);
  }

  get end(): number {
    return this.#end;
  }

  /** Bytes the ring holds allocated. */
  get bytes(): number {
    return this.#ring.byteLength;
  }

  /** Appends `pcm` (the oldest samples are overwritten once the ring is full). */
  append(pcm: Int16Array): void {
    const ring = this.#ring;
    const size = ring.length;
    let src = pcm.length > size ? pcm.subarray(pcm.length - size) : pcm;
    this.#end += pcm.length - src.length;
    while (src.length > 0) {
      const at = this.#end % size;
      const n = Math.min(src.length, size - at);
      ring.set(src.subarray(0, n), at);
      this.#end += n;
      src = src.subarray(n);
    }
  }

  /**
   * The samples of the stream ranges [from, to) given as pairs, clamped to what the ring still holds, concatenated in
   * one new array (ranges wholly out of the window add nothing).
   */
  read(ranges: readonly number[]): Int16Array {
    const { spans, total } = clampedSpans(ranges, this.start, this.#end);
    const out = new Int16Array(total);
    const ring = this.#ring;
    const size = ring.length;
    let at = 0;
    for (let [from, to] of spans) {
      while (from < to) {
        const r = from % size;
        const n = Math.min(to - from, size - r);
        out.set(ring.subarray(r, r + n), at);
        at += n;
        from += n;
      }
    }
    return out;
  }
}
