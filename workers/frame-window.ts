// The last seconds of an Opus session's audio as the device sent it, for speaker identification's clips: 20 s of
// speech in Opus is some tens of kilobytes where its 16 kHz PCM is 640 KB, so the window keeps the packets and a clip
// is decoded when it is asked for, with a decoder of its own started a little before it.
import type { ChannelDecoder } from './channel-decoders.js';
import { clampedSpans } from './pcm-window.js';

/** What a spent slot of the chunk array holds until the array is compacted. */
const EMPTY = new Uint8Array(0);

/**
 * Audio decoded before a clip and thrown away (16 kHz samples), so that a fresh decoder has settled by the clip's
 * first sample: after half a second of speech its output was the stream's own, sample for sample, in our tests.
 */
export const WARMUP_SAMPLES = 8000;

/**
 * Packet bytes are kept in chunks of this size, which every window of the thread takes from and gives back to one
 * pool. Windows that grew their own arrays each left a trail of freed, ever larger arrays in the thread's malloc arena
 * as hundreds of sessions filled at once; chunks of one size are reused instead, and a window holds at most one
 * chunk more than its packets.
 */
export const CHUNK_BYTES = 16 * 1024;
/** Free chunks the thread keeps for its windows; more go back to the allocator (a node whose sessions ended). */
const MAX_FREE_CHUNKS = 64;
const freeChunks: Uint8Array[] = [];

function takeChunk(size: number): Uint8Array {
  return size <= CHUNK_BYTES ? (freeChunks.pop() ?? new Uint8Array(CHUNK_BYTES)) : new Uint8Array(size);
}

function giveChunk(chunk: Uint8Array): void {
  if (chunk.length === CHUNK_BYTES && freeChunks.length < MAX_FREE_CHUNKS) freeChunks.push(chunk);
}

/** Chunks in this thread's pool, free for any window (tests). */
export const pooledChunks = (): number => freeChunks.length;

/** Batches (decode tasks of the stream) it starts with room for. */
const INITIAL_BATCHES = 64;

/**
 * A window of packets addressed by stream position (16 kHz samples since the session's first audio), kept per decode
 * batch: the batch's packets and how many samples they decoded to. Packets lie one after another in pooled chunks (a
 * packet that does not fit in what is left of a chunk starts the next one; one longer than a chunk gets a chunk of its
 * own size); lengths and batches in flat typed arrays compacted in place, so a long session allocates nothing per
 * batch once they are big enough.
 */
export class FrameWindow {
  readonly #samples: number;
  readonly #maxBytes: number;
  readonly #decoder: () => ChannelDecoder;
  /** Chunks holding the packets, the oldest live one at #chunkHead; the first live packet at #byteHead in it. */
  #chunks: Uint8Array[] = [];
  #chunkHead = 0;
  #byteHead = 0;
  /** Where the next packet goes in the last chunk. */
  #byteTail = 0;
  /** Packet bytes held. */
  #liveBytes = 0;
  /** Packet lengths (a message may be up to 64 KiB), live in [#packetHead, #packetTail). */
  #lengths = new Uint32Array(INITIAL_BATCHES * 8);
  #packetHead = 0;
  #packetTail = 0;
  /** Per batch: its first stream position, its packets and samples; live in [#batchHead, #batchTail). */
  #starts = new Float64Array(INITIAL_BATCHES);
  #packets = new Uint32Array(INITIAL_BATCHES);
  #decoded = new Uint32Array(INITIAL_BATCHES);
  #batchHead = 0;
  #batchTail = 0;
  #end: number;

  /**
   * @param samples how much audio the window holds; @param position the stream position of the first packet;
   * @param decoder makes a fresh decoder of the stream's codec (a clip's own); @param maxBytes the most packet bytes
   * kept (past it the oldest go, even within the window): the PCM the window stands for by default.
   */
  constructor(samples: number, position: number, decoder: () => ChannelDecoder, maxBytes = samples * 2) {
    if (!Number.isInteger(samples) || samples <= 0) throw new RangeError('a window holds at least one sample');
    this.#samples = samples;
    this.#maxBytes = maxBytes;
    this.#decoder = decoder;
    this.#end = position;
  }

  /** Stream position of the oldest sample a clip may take (older packets only warm a clip's decoder up). */
  get start(): number {
    return Math.max(this.#end - this.#samples, this.#batchHead < this.#batchTail ? this.#starts[this.#batchHead]! : this.#end);
  }

  get end(): number {
    return this.#end;
  }

  /** Bytes the window holds allocated. */
  get bytes(): number {
    let chunks = 0;
    for (let i = this.#chunkHead; i < this.#chunks.length; i++) chunks += this.#chunks[i]!.byteLength;
    return chunks + this.#lengths.byteLength + this.#starts.byteLength + this.#packets.byteLength + this.#decoded.byteLength;
  }

  /** Gives the window's chunks back to the thread's pool; the window is empty after. */
  dispose(): void {
    for (let i = this.#chunkHead; i < this.#chunks.length; i++) giveChunk(this.#chunks[i]!);
    this.#chunks = [];
    this.#chunkHead = this.#byteHead = this.#byteTail = this.#liveBytes = 0;
    this.#packetHead = this.#packetTail = this.#batchHead = this.#batchTail = 0;
  }

  /** One decode batch of the stream: its packets (in order) and the samples they decoded to. */
  append(packets: readonly Uint8Array[], samples: number): void {
    if (packets.length === 0 && samples === 0) return;
    let size = 0;
    for (const p of packets) size += p.length;
    this.#roomForBatch(packets.length, size);
    for (const p of packets) {
      let chunk = this.#chunks[this.#chunks.length - 1];
      if (chunk === undefined || this.#byteTail + p.length > chunk.length) {
        chunk = takeChunk(p.length);
        this.#chunks.push(chunk);
        this.#byteTail = 0;
      }
      chunk.set(p, this.#byteTail);
      this.#byteTail += p.length;
      this.#liveBytes += p.length;
      this.#lengths[this.#packetTail++] = p.length;
    }
    this.#starts[this.#batchTail] = this.#end;
    this.#packets[this.#batchTail] = packets.length;
    this.#decoded[this.#batchTail] = samples;
    this.#batchTail++;
    this.#end += samples;
    // Batches wholly older than the window and a warm-up before it go.
    const keepFrom = this.#end - this.#samples - WARMUP_SAMPLES;
    while (this.#batchHead < this.#batchTail - 1 && this.#starts[this.#batchHead]! + this.#decoded[this.#batchHead]! <= keepFrom) this.#dropOldest();
  }

  /**
   * The samples of the stream ranges [from, to) given as pairs, clamped to what the window still holds, decoded and
   * concatenated in one new array (ranges wholly out of the window add nothing).
   */
  read(ranges: readonly number[]): Int16Array {
    const { spans, total } = clampedSpans(ranges, this.start, this.#end);
    const out = new Int16Array(total);
    if (total === 0) return out;
    const lo = Math.min(...spans.map(([from]) => from));
    const hi = Math.max(...spans.map(([, to]) => to));
    // The batches from a warm-up before the first sample asked for to the last one, decoded in one run.
    let first = this.#batchHead;
    while (first + 1 < this.#batchTail && this.#starts[first + 1]! <= lo - WARMUP_SAMPLES) first++;
    let last = first;
    while (last + 1 < this.#batchTail && this.#starts[last + 1]! < hi) last++;
    let packet = this.#packetHead;
    let chunk = this.#chunkHead;
    let byte = this.#byteHead;
    for (let b = this.#batchHead; b < first; b++) {
      for (let k = 0; k < this.#packets[b]!; k++) {
        const n = this.#lengths[packet++]!;
        if (byte + n > this.#chunks[chunk]!.length) [chunk, byte] = [chunk + 1, 0];
        byte += n;
      }
    }
    const packets: Uint8Array[] = [];
    for (let b = first; b <= last; b++) {
      for (let k = 0; k < this.#packets[b]!; k++) {
        const n = this.#lengths[packet++]!;
        if (byte + n > this.#chunks[chunk]!.length) [chunk, byte] = [chunk + 1, 0];
        packets.push(this.#chunks[chunk]!.subarray(byte, byte + n));
        byte += n;
      }
    }
    const decoder = this.#decoder();
    let pcm: Int16Array[];
    try {
      pcm = decoder.decode(packets).pcm;
    } finally {
      decoder.dispose();
    }
    // Copy each span out of the decoded run, which starts at batch `first`'s position.
    const base = this.#starts[first]!;
    let at = 0;
    for (const [from, to] of spans) {
      let offset = from - base;
      let want = to - from;
      for (const chunk of pcm) {
        if (want === 0) break;
        if (offset >= chunk.length) {
          offset -= chunk.length;
          continue;
        }
        const n = Math.min(want, chunk.length - offset);
        out.set(chunk.subarray(offset, offset + n), at);
        at += n;
        want -= n;
        offset = 0;
      }
      at += want; // a run shorter than the record (it should not be) leaves silence, keeping the spans in place
    }
    return out;
  }

  #dropOldest(): void {
    const b = this.#batchHead++;
    for (let k = 0; k < this.#packets[b]!; k++) {
      const n = this.#lengths[this.#packetHead++]!;
      // The same rule as append(): a packet that did not fit in what was left of a chunk is at the next one's start.
      if (this.#byteHead + n > this.#chunks[this.#chunkHead]!.length) this.#nextHeadChunk();
      this.#byteHead += n;
      this.#liveBytes -= n;
    }
    // The head chunk's packets all gone (and a later chunk holds the tail): it goes back to the pool.
    if (this.#chunkHead < this.#chunks.length - 1 && this.#byteHead >= this.#chunks[this.#chunkHead]!.length) this.#nextHeadChunk();
  }

  #nextHeadChunk(): void {
    giveChunk(this.#chunks[this.#chunkHead]!);
    this.#chunks[this.#chunkHead++] = EMPTY;
    this.#byteHead = 0;
    // The array of chunks is compacted once most of it is spent.
    if (this.#chunkHead >= 16 && this.#chunkHead * 2 >= this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#chunkHead);
      this.#chunkHead = 0;
    }
  }

  /**
   * Room at the tails for one more batch of `packets` packets and `size` bytes. Past the byte bound the oldest batches
   * go, even within the window. An array short of room is compacted while what is live fills at most four fifths of
   * it, else replaced by one with room to spare: each element is moved a bounded number of times.
   */
  #roomForBatch(packets: number, size: number): void {
    while (this.#batchHead < this.#batchTail && this.#liveBytes + size > this.#maxBytes) this.#dropOldest();
    if (this.#packetTail + packets > this.#lengths.length) {
      const live = this.#packetTail - this.#packetHead;
      this.#lengths = fifoRoom(this.#lengths, this.#packetHead, this.#packetTail, live + packets);
      this.#packetHead = 0;
      this.#packetTail = live;
    }
    if (this.#batchTail + 1 > this.#starts.length) {
      const live = this.#batchTail - this.#batchHead;
      this.#starts = fifoRoom(this.#starts, this.#batchHead, this.#batchTail, live + 1);
      this.#packets = fifoRoom(this.#packets, this.#batchHead, this.#batchTail, live + 1);
      this.#decoded = fifoRoom(this.#decoded, this.#batchHead, this.#batchTail, live + 1);
      this.#batchHead = 0;
      this.#batchTail = live;
    }
  }
}

/**
 * `a`'s live elements [head, tail) moved to its start, or into an array a quarter larger than `need` when `need` would
 * fill more than 4/5 of it: each element is moved about four times over its life, and the arrays stay close to what
 * the window holds (the window's size changes little once the stream's bitrate is known).
 */
function fifoRoom<T extends Uint32Array | Float64Array>(a: T, head: number, tail: number, need: number): T {
  if (need * 5 <= a.length * 4) {
    a.copyWithin(0, head, tail);
    return a;
  }
  const b = new (a.constructor as new (n: number) => T)(Math.ceil(need * 1.25));
  b.set(a.subarray(head, tail));
  return b;
}
