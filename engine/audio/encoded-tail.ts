// The encoded audio of one channel that its speech provider has not yet answered for, as the device sent it: a
// provider may fail before it finalises what it was sent, and that audio is kept and transcribed later.

/**
 * Audio kept before the first unanswered sample, so that a fresh decoder has settled by then (codecs overlap frames):
 * 60 ms at 16 kHz, three 20 ms Opus or AAC-at-48-kHz frames, six LC3 frames.
 */
export const WARM_UP_SAMPLES = 960;

const SAMPLE_RATE_HZ = 16000;

/**
 * Room kept beyond the live bytes and entries when the storage is resized: a quarter. Between resizes the live part
 * moves to the front when the end is reached, so each byte pushed is moved about four times; doubling would leave half
 * of every session's storage empty.
 */
const SLACK = 1.25;
const MIN_BYTES = 2048;
const MIN_ENTRIES = 64;

export interface EncodedSlice {
  /** Stream sample (16 kHz) where the first message's audio starts. */
  startSample: number;
  /** Copies of the messages, in order. */
  messages: Uint8Array[];
}

/**
 * Kept encoded rather than as the 16 kHz PCM that went out, it is a small fraction of the memory, and it is decoded
 * again only when a provider actually fails. Messages are copied into one growing byte array per channel (no object
 * per message), each with its place on the stream's 16 kHz timeline, from its duration (engine/audio/encoded-duration.ts
 * reads it from the bytes). Places are the running total of seconds, rounded, so frames of a fractional sample count
 * (AAC at 48 kHz: 341 1/3 samples of 16 kHz) do not drift.
 */
export class EncodedTail {
  #maxSamples: number;
  /** Live bytes are `#bytes[#from, #to)`. */
  #bytes = new Uint8Array(MIN_BYTES);
  #from = 0;
  #to = 0;
  /**
   * Live messages are entries [#head, #count): each one's length in bytes and the stream sample where it starts.
   * Typed arrays, moved and grown like the bytes: a JS array per channel, grown and sliced every second, made copies
   * that outlived the young generation.
   */
  #lengths = new Int32Array(MIN_ENTRIES);
  #starts = new Float64Array(MIN_ENTRIES);
  #head = 0;
  #count = 0;
  /**
   * Most live bytes and messages since the storage was last resized or moved to the front: a resize is sized by them,
   * not by what is live at that moment.
   *
   * Live audio rises from the warm-up to a provider's next final result and falls back at each answer. Sized by the
   * moment, storage that filled up just after an answer shrank to the minimum and grew back before the next, each
   * time as garbage that outlived the young generation; sized by the peak, it shrinks only after a backlog (a stalled
   * provider's) was answered.
   */
  #peakBytes = 0;
  #peakMessages = 0;
  /** Times the storage was reallocated (tests). */
  resizes = 0;
  /** Seconds of audio pushed, and the stream sample after the last message (that total, rounded). */
  #endS = 0;
  #end = 0;

  /**
   * @param maxSamples most audio kept, in 16 kHz samples; beyond it the oldest goes (a provider that never answers
   * cannot make a session hold audio without end)
   */
  constructor(maxSamples: number) {
    this.#maxSamples = maxSamples;
  }

  /** Bytes held (tests and metrics). */
  get bytes(): number {
    return this.#to - this.#from;
  }

  /** The stream sample after the last message pushed. */
  get end(): number {
    return this.#end;
  }

  /** Messages held. */
  get messages(): number {
    return this.#count - this.#head;
  }

  /** Bytes of storage allocated, live or not (the byte array and the entries' arrays). */
  get storageBytes(): number {
    return this.#bytes.byteLength + this.#lengths.byteLength + this.#starts.byteLength;
  }

  /**
   * Stops dropping the oldest audio: once its provider failed, the tail is read when the audio then on its way to the
   * decoder is back, and everything from the provider's last answer on may be needed. The session is ending by then.
   */
  keepAll(): void {
    this.#maxSamples = Infinity;
  }

  /** Copies `message`, which holds `seconds` of audio. */
  push(message: Uint8Array, seconds: number): void {
    const n = message.length;
    if (this.#to + n > this.#bytes.length) this.#makeRoom(n);
    this.#bytes.set(message, this.#to);
    this.#to += n;
    if (this.#count === this.#lengths.length) this.#makeEntryRoom();
    this.#lengths[this.#count] = n;
    this.#starts[this.#count] = this.#end;
    this.#count++;
    this.#endS += seconds;
    this.#end = Math.round(this.#endS * SAMPLE_RATE_HZ);
    // Beyond the bound the oldest go (the last always stays).
    while (this.#head < this.#count - 1 && this.#end - this.#starts[this.#head]! > this.#maxSamples) this.#dropHead();
  }

  /** The provider answered for everything before stream sample `sample`: drops what ends before it, but the warm-up. */
  release(sample: number): void {
    // Live audio only grows between answers, so its peak is what is live as an answer comes (or at a resize).
    this.#peakBytes = Math.max(this.#peakBytes, this.#to - this.#from);
    this.#peakMessages = Math.max(this.#peakMessages, this.#count - this.#head);
    const keepFrom = sample - WARM_UP_SAMPLES;
    // A message ends where the next starts; the last always stays (its end is not known to be answered for).
    while (this.#head < this.#count - 1 && this.#starts[this.#head + 1]! <= keepFrom) this.#dropHead();
  }

  /** Copies of the messages that hold stream samples [from, to), with the warm-up before `from`. */
  slice(from: number, to: number): EncodedSlice {
    const messages: Uint8Array[] = [];
    let startSample = -1;
    let at = this.#from;
    for (let i = this.#head; i < this.#count; i++) {
      const start = this.#starts[i]!;
      const next = i + 1 < this.#count ? this.#starts[i + 1]! : this.#end;
      const len = this.#lengths[i]!;
      if (next > from - WARM_UP_SAMPLES && start < to) {
        if (startSample < 0) startSample = start;
        messages.push(this.#bytes.slice(at, at + len));
      }
      at += len;
    }
    return { startSample: Math.max(0, startSample), messages };
  }

  #dropHead(): void {
    this.#from += this.#lengths[this.#head]!;
    this.#head++;
  }

  /**
   * Room for one more entry: live entries move to the front, into new arrays with SLACK room beyond the peak when they
   * would leave less than that (or when the arrays are more than twice that large: a backlog since answered).
   */
  #makeEntryRoom(): void {
    const live = this.#count - this.#head;
    const size = Math.max(MIN_ENTRIES, Math.ceil((Math.max(live, this.#peakMessages) + 1) * SLACK));
    this.#peakMessages = live;
    if ((live + 1) * SLACK > this.#lengths.length || size * 2 < this.#lengths.length) {
      this.resizes++;
      const lengths = new Int32Array(size);
      const starts = new Float64Array(size);
      lengths.set(this.#lengths.subarray(this.#head, this.#count));
      starts.set(this.#starts.subarray(this.#head, this.#count));
      this.#lengths = lengths;
      this.#starts = starts;
    } else {
      this.#lengths.copyWithin(0, this.#head, this.#count);
      this.#starts.copyWithin(0, this.#head, this.#count);
    }
    this.#head = 0;
    this.#count = live;
  }

  /**
   * Room for `n` more bytes: the live bytes move to the front, into a new array with SLACK room beyond the peak (at
   * least 2 KiB) when they would leave less than that, or when the old one is more than twice that large (a stalled
   * provider's backlog, since answered).
   */
  #makeRoom(n: number): void {
    const live = this.#to - this.#from;
    const size = Math.max(MIN_BYTES, Math.ceil(Math.max(live + n, this.#peakBytes) * SLACK));
    this.#peakBytes = live;
    let bytes = this.#bytes;
    if ((live + n) * SLACK > bytes.length || size * 2 < bytes.length) {
      this.resizes++;
      bytes = new Uint8Array(size);
      bytes.set(this.#bytes.subarray(this.#from, this.#to));
    } else {
      bytes.copyWithin(0, this.#from, this.#to);
    }
    this.#bytes = bytes;
    this.#from = 0;
    this.#to = live;
  }
}
