// The last seconds of an Opus session's audio as the device sent it, for speaker identification's clips: 20 s of
// speech in Opus is some tens of kilobytes where its 16 kHz PCM is 640 KB, so the window keeps the packets and a clip
// is decoded when it is asked for, with a decoder of its own started a little before it.
import type { ChannelDecoder } from './channel-decoders.js';
import { clampedSpans } from './pcm-window.js';

/**
 * Audio decoded before a clip and thrown away (16 kHz samples), so that a fresh decoder has settled by the clip's
 * first sample: after half a second of speech its output was the stream's own, sample for sample, in our tests.
 */
export const WARMUP_SAMPLES = 8000;

/** Bytes of packets the window starts with room for; it doubles as needed. */
const INITIAL_BYTES = 16 * 1024;
/** Batches (decode tasks of the stream) it starts with room for. */
const INITIAL_BATCHES = 64;

/**
 * A window of packets addressed by stream position (16 kHz samples since the session's first audio), kept per decode
 * batch: the batch's packets and how many samples they decoded to. Storage is flat typed arrays compacted in place, so
 * a long session allocates nothing per batch once they are big enough.
 */
export class FrameWindow {
  readonly #samples: number;
  readonly #maxBytes: number;
  readonly #decoder: () => ChannelDecoder;
  /** Packet bytes, live in [#byteHead, #byteTail). */
  #data = new Uint8Array(INITIAL_BYTES);
  #byteHead = 0;
  #byteTail = 0;
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
    return this.#data.byteLength + this.#lengths.byteLength + this.#starts.byteLength + this.#packets.byteLength + this.#decoded.byteLength;
  }

  /** One decode batch of the stream: its packets (in order) and the samples they decoded to. */
  append(packets: readonly Uint8Array[], samples: number): void {
    if (packets.length === 0 && samples === 0) return;
    let size = 0;
    for (const p of packets) size += p.length;
    this.#roomForBatch(packets.length, size);
    for (const p of packets) {
      this.#data.set(p, this.#byteTail);
      this.#byteTail += p.length;
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
    let byte = this.#byteHead;
    for (let b = this.#batchHead; b < first; b++) {
      for (let k = 0; k < this.#packets[b]!; k++) byte += this.#lengths[packet++]!;
    }
    const packets: Uint8Array[] = [];
    for (let b = first; b <= last; b++) {
      for (let k = 0; k < this.#packets[b]!; k++) {
        const n = this.#lengths[packet++]!;
        packets.push(this.#data.subarray(byte, byte + n));
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
    for (let k = 0; k < this.#packets[b]!; k++) this.#byteHead += this.#lengths[this.#packetHead++]!;
  }

  /**
   * Room at the tails for one more batch of `packets` packets and `size` bytes. Past the byte bound the oldest batches
   * go, even within the window. An array short of room is compacted while what is live fills at most three quarters
   * of it, else replaced by one with room to spare: each byte is moved a bounded number of times.
   */
  #roomForBatch(packets: number, size: number): void {
    while (this.#batchHead < this.#batchTail && this.#byteTail - this.#byteHead + size > this.#maxBytes) this.#dropOldest();
    if (this.#byteTail + size > this.#data.length) {
      const live = this.#byteTail - this.#byteHead;
      this.#data = fifoRoom(this.#data, this.#byteHead, this.#byteTail, live + size);
      this.#byteHead = 0;
      this.#byteTail = live;
    }
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
function fifoRoom<T extends Uint8Array | Uint32Array | Float64Array>(a: T, head: number, tail: number, need: number): T {
  if (need * 5 <= a.length * 4) {
    a.copyWithin(0, head, tail);
    return a;
  }
  const b = new (a.constructor as new (n: number) => T)(Math.ceil(need * 1.25));
  b.set(a.subarray(head, tail));
  return b;
}
