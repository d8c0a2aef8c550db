// The codec shards' wire format: many sessions' messages in one buffer to the thread, their PCM in one buffer back,
// both moved without a copy (a task per frame, or a moved buffer per message, costs more than decoding the frame).
import type { FailAnswer, PackedAnswer } from './messages.js';

/**
 * The answer is one Int32Array of fixed-size entries and one Int16Array with every stream's PCM, channel after channel.
 * Ints per answer entry: key, failed (0/1), frames, corruptFrames, recreated (0/1), channels, samples of channel 1 and 2.
 */
const ENTRY_INTS = 8;
const MAX_CHANNELS = 2;

/** Concatenates chunks into one array that owns its buffer (so it can be moved). */
export function concatPcm(chunks: readonly Int16Array[]): Int16Array {
  let n = 0;
  for (const c of chunks) n += c.length;
  const out = new Int16Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * How many times larger than what it is used for a reused buffer may be before it is given back: a stream's staging
 * area larger than this many times what it staged (RecordWriter.clear()), a scratch area larger than this many times
 * the most any of the last SCRATCH_LOOK_TASKS tasks used, a spare answer buffer this many times larger than the largest
 * answer of that period and of the current one.
 */
export const OVERSIZE_FACTOR = 8;

/** `start` doubled until it is at least `atLeast`: the size a growing or shrinking reused buffer takes. */
export function doubledTo(start: number, atLeast: number): number {
  let size = start;
  while (size < atLeast) size *= 2;
  return size;
}

/**
 * Main side: one stream's staged records, each [u32 stream key][u32 byte length][bytes, padded to 4], in a buffer that
 * stays allocated between tasks. Each stream stages on its
 * own, so a task gathers the streams that are due with one copy each and never reads the records of streams held back.
 */
export class RecordWriter {
  readonly #initialBytes: number;
  #bytes: Uint8Array;
  #words: Uint32Array;
  #used = 0;

  /** @param initialBytes the buffer's first size (a multiple of 4); it doubles when a burst needs more. */
  constructor(initialBytes = 256) {
    this.#initialBytes = initialBytes;
    this.#bytes = new Uint8Array(initialBytes);
    this.#words = new Uint32Array(this.#bytes.buffer);
  }

  get byteLength(): number {
    return this.#used;
  }

  /** Bytes the writer holds allocated (tests). */
  get capacity(): number {
    return this.#bytes.byteLength;
  }

  add(key: number, message: Uint8Array): void {
    const size = 8 + ((message.byteLength + 3) & ~3);
    if (this.#used + size > this.#bytes.byteLength) this.#grow(this.#used + size);
    this.#words[this.#used >> 2] = key;
    this.#words[(this.#used >> 2) + 1] = message.byteLength;
    this.#bytes.set(message, this.#used + 8);
    this.#used += size;
  }

  /** Copies the staged records into `out` at `at` and empties the writer; answers where the next records go. */
  takeInto(out: Uint8Array, at: number): number {
    const used = this.#used;
    if (used > 0) out.set(this.#bytes.subarray(0, used), at);
    this.clear();
    return at + used;
  }

  /** Drops the staged records. A buffer a burst grew far beyond what the stream now stages is given back. */
  clear(): void {
    const used = this.#used;
    this.#used = 0;
    const size = this.#bytes.byteLength;
    if (size < this.#initialBytes * 16 || used * OVERSIZE_FACTOR >= size) return;
    this.#resize(doubledTo(this.#initialBytes, used * 2));
  }

  #grow(need: number): void {
    this.#resize(doubledTo(this.#bytes.byteLength * 2, need));
  }

  #resize(size: number): void {
    const bytes = new Uint8Array(size);
    bytes.set(this.#bytes.subarray(0, this.#used));
    this.#bytes = bytes;
    this.#words = new Uint32Array(bytes.buffer);
  }
}

/**
 * Each record in `records[from, to)`, in order: its message as a view, and its stream key. `words` is a Uint32Array
 * over the same bytes from `records`' start (it reads the headers).
 */
export function forEachRecord(records: Uint8Array, words: Uint32Array, from: number, to: number, fn: (message: Uint8Array, key: number) => void): void {
  for (let at = from; at < to; ) {
    const length = words[(at >> 2) + 1]!;
    fn(records.subarray(at + 8, at + 8 + length), words[at >> 2]!);
    at += 8 + ((length + 3) & ~3);
  }
}

/** Thread side: each key's messages in arrival order, as views into `records`. */
export function readRecords(records: Uint8Array): Map<number, Uint8Array[]> {
  const words = new Uint32Array(records.buffer, records.byteOffset, records.byteLength >> 2);
  const byKey = new Map<number, Uint8Array[]>();
  forEachRecord(records, words, 0, records.byteLength, (message, key) => {
    const list = byKey.get(key);
    if (list === undefined) byKey.set(key, [message]);
    else list.push(message);
  });
  return byKey;
}

/** Bytes of a recycled answer buffer: a power of two, at least 16 KiB, so one fits the next tasks of similar load. */
export function recycledBytes(bytes: number): number {
  return doubledTo(16 * 1024, bytes);
}

/** Spare answer buffers a shard keeps on each side at most (main: to hand back; thread: to fill). */
export const MAX_SPARE_BUFFERS = 4;

/** Samples of the scratch area a shard starts with (16 KiB). */
export const INITIAL_SCRATCH_SAMPLES = 8 * 1024;
/** Tasks between two looks at whether the scratch area is far larger than the tasks now need. */
export const SCRATCH_LOOK_TASKS = 64;

/**
 * Thread side: the PCM memory of decode tasks, reused instead of allocated per task. Fresh answer and decoder buffers
 * per task sat in this thread's malloc arena until a GC of one thread or the other found them dead, and the arena grew
 * to hold them; now decoders write into a scratch area every task reuses, and the answer's buffer is one the main
 * thread handed back after reading the previous answers.
 */
export class PcmBuffers {
  #scratch = new Int16Array(INITIAL_SCRATCH_SAMPLES);
  #used = 0;
  /** The most scratch samples a task used since the last look, and the tasks since then. */
  #peak = 0;
  #tasks = 0;
  /** The most bytes an answer needed since the last look, and in the period before it. */
  #answerPeak = 0;
  #lastAnswerPeak = 0;
  #spare: ArrayBuffer[] = [];

  /**
   * Starts a task: the scratch area is free again (the previous task's answer was copied out of it). Every
   * SCRATCH_LOOK_TASKS tasks, an area grown by a burst (a backlog after a stall, many sessions opened at once) to more
   * than OVERSIZE_FACTOR times what the tasks since used is replaced by one twice that size, so a burst does not leave
   * the thread holding its peak for the rest of the process's life. Spare answer buffers far larger than the answers
   * of this period and the last are let go at the same time.
   */
  reset(): void {
    this.#peak = Math.max(this.#peak, this.#used);
    this.#used = 0;
    if (++this.#tasks < SCRATCH_LOOK_TASKS) return;
    const size = this.#scratch.length;
    if (size > INITIAL_SCRATCH_SAMPLES && this.#peak * OVERSIZE_FACTOR < size) {
      this.#scratch = new Int16Array(doubledTo(INITIAL_SCRATCH_SAMPLES, this.#peak * 2));
    }
    this.#peak = 0;
    this.#tasks = 0;
    this.#lastAnswerPeak = this.#answerPeak;
    this.#answerPeak = 0;
    this.#spare = this.#spare.filter((b) => this.#keeps(b));
  }

  /** Whether a spare answer buffer is worth keeping: not far larger than the answers of this period and the last. */
  #keeps(b: ArrayBuffer): boolean {
    return b.byteLength > 0 && b.byteLength <= recycledBytes(Math.max(this.#answerPeak, this.#lastAnswerPeak)) * OVERSIZE_FACTOR;
  }

  /** Samples the scratch area holds (tests). */
  get scratchSamples(): number {
    return this.#scratch.length;
  }

  /**
   * `samples` of scratch for this task, valid until the next reset(). A task larger than the area gets a fresh one
   * (kept for the next tasks); the views already handed out keep the old one alive until the task ends.
   */
  scratch(samples: number): Int16Array {
    if (this.#used + samples > this.#scratch.length) {
      this.#peak = Math.max(this.#peak, this.#used);
      this.#scratch = new Int16Array(doubledTo(this.#scratch.length * 2, samples));
      this.#used = 0;
    }
    const view = this.#scratch.subarray(this.#used, this.#used + samples);
    this.#used += samples;
    return view;
  }

  /** Buffers the main thread handed back; beyond MAX_SPARE_BUFFERS they are left to the GC. */
  give(buffers: readonly ArrayBuffer[]): void {
    for (const b of buffers) if (this.#spare.length < MAX_SPARE_BUFFERS && this.#keeps(b)) this.#spare.push(b);
  }

  /** An answer array of `samples`, over a handed-back buffer when one is large enough (its bytes are not cleared). */
  answer(samples: number): Int16Array {
    const bytes = samples * 2;
    this.#answerPeak = Math.max(this.#answerPeak, bytes);
    for (let i = this.#spare.length - 1; i >= 0; i--) {
      const b = this.#spare[i]!;
      if (b.byteLength >= bytes) {
        this.#spare.splice(i, 1);
        return new Int16Array(b, 0, samples);
      }
    }
    return new Int16Array(new ArrayBuffer(recycledBytes(bytes)), 0, samples);
  }

  get spareBuffers(): number {
    return this.#spare.length;
  }
}

/** One stream's decoded batch as the thread produced it: PCM chunks per channel. */
export interface DecodedPart {
  pcm: Int16Array[][];
  frames: number;
  corruptFrames: number;
  recreated: boolean;
}

/**
 * Thread side: packs every stream's result into one entry table and one PCM buffer (failures ride as data); the PCM
 * array comes from `buffers` when given (its buffer may be larger than the array: move `pcm.buffer` whole).
 */
export function packAnswer(parts: readonly { key: number; result: DecodedPart | FailAnswer }[], buffers?: PcmBuffers): PackedAnswer {
  const entries = new Int32Array(parts.length * ENTRY_INTS);
  let total = 0;
  for (const { result } of parts) if (!('ok' in result)) for (const ch of result.pcm) for (const c of ch) total += c.length;
  const pcm = buffers ? buffers.answer(total) : new Int16Array(total);
  const failures: PackedAnswer['failures'] = [];
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    const { key, result } = parts[i]!;
    const e = i * ENTRY_INTS;
    entries[e] = key;
    if ('ok' in result) {
      entries[e + 1] = 1;
      failures.push({ key, code: result.code, message: result.message });
      continue;
    }
    entries[e + 2] = result.frames;
    entries[e + 3] = result.corruptFrames;
    entries[e + 4] = result.recreated ? 1 : 0;
    const channels = Math.min(result.pcm.length, MAX_CHANNELS);
    entries[e + 5] = channels;
    for (let c = 0; c < channels; c++) {
      const start = at;
      for (const chunk of result.pcm[c]!) {
        pcm.set(chunk, at);
        at += chunk.length;
      }
      entries[e + 6 + c] = at - start;
    }
  }
  return { ok: true, entries, pcm, failures };
}

/**
 * Main side: one stream's part of a packed answer; each channel's PCM is a view into the answer's buffer, shared with
 * the other streams of the task (no copy per stream; readers copy what they keep).
 */
export type StreamPart = { pcm: Int16Array[]; frames: number; corruptFrames: number; recreated: boolean } | FailAnswer;

/** Main side: each stream's part of a packed answer, in the answer's order (that of the task's streams). */
export function eachPackedPart(answer: PackedAnswer, use: (key: number, part: StreamPart) => void): void {
  const { entries, pcm } = answer;
  let at = 0;
  for (let e = 0; e < entries.length; e += ENTRY_INTS) {
    const key = entries[e]!;
    if (entries[e + 1] === 1) {
      const f = answer.failures.find((x) => x.key === key);
      use(key, { ok: false, code: f?.code ?? 'ENG_ERR_INTERNAL', message: f?.message ?? 'decode failed' });
      continue;
    }
    const channels: Int16Array[] = [];
    for (let c = 0; c < entries[e + 5]!; c++) {
      const n = entries[e + 6 + c]!;
      channels.push(pcm.subarray(at, at + n));
      at += n;
    }
    use(key, { pcm: channels, frames: entries[e + 2]!, corruptFrames: entries[e + 3]!, recreated: entries[e + 4] === 1 });
  }
}

