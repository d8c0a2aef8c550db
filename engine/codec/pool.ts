// The process's codec shards (engine/codec/shard.ts) and where each new session's stream goes: the first thread not
// yet busy (engine/codec/fill.ts), or the main thread itself while it has room (CodecPoolOptions.inline).
import { availableParallelism } from 'node:os';
import { EngineError } from '../errors.js';
import { checkCodecParams, type HeapAnswer } from '../../workers/messages.js';
import { ShardFill } from './fill.js';
import { Shard } from './shard.js';
import { CodecStream, type CodecStreamOptions } from './stream.js';

export { CODECS, CODEC_SAMPLE_RATES_HZ, OUTPUT_SAMPLE_RATE_HZ, type Codec, type CodecParams } from '../../workers/messages.js';

/** Least time between two decode tasks of a shard, in ms: frames that arrive meanwhile share one thread hop. */
export const BATCH_WINDOW_MS = 5;
/** Longest a stream's audio is held back for its provider's next message, in ms: a paused device's rest goes then. */
export const MAX_HOLD_MS = 100;
/**
 * New sessions decode on the main thread while it was busy less than this percent of the last second: a lone CPU
 * saves the thread hop that way, while with more CPUs the main thread's time is worth more than the hop.
 */
export const INLINE_BUSY_PCT = availableParallelism() === 1 ? 100 : 0;

export interface CodecPoolOptions {
  /**
   * Codec shards, one thread each (CODEC_THREADS, read by engine/config.ts and passed in here).
   * @defaultValue `os.availableParallelism() - 1`, at least 2: with one, every session's audio waits whenever that
   * thread is off its core.
   */
  threads?: number;
  /**
   * Least time between two decode tasks of a shard, in milliseconds: what arrives meanwhile leaves together. Audio
   * complete for its consumer waits on average half of it plus the decoding of what gathered meanwhile.
   * @defaultValue BATCH_WINDOW_MS
   */
  batchWindowMs?: number;
  /** Longest a stream's staged audio is held back for its sockets' send plans, in milliseconds. @defaultValue MAX_HOLD_MS */
  maxHoldMs?: number;
  /**
   * Whether a session being opened now decodes on the calling (main) thread instead of a shard, given the sessions
   * open (engine/runtime/main-load.ts decides for the engine): asked at each open(), and the session stays where it
   * was put; its provider sockets then live on the main thread too. Absent: every session goes to a shard.
   */
  inline?: (sessions: number) => boolean;
  /**
   * Share of a core a thread may be busy before new sessions go to the next (engine/codec/fill.ts); 0 spreads the
   * sessions over the threads by count. @defaultValue FILL_BUSY
   */
  fillBusy?: number;
  /** Worker module; tests point it at a fixture. @defaultValue dist/workers/decode.js */
  filename?: string;
  /**
   * Called as each decode task is answered, with how long its longest-waiting audio waited, in seconds: from the
   * moment it was due (complete for its consumer, or held for `maxHoldMs`) to its PCM back on this thread. The
   * engine's own share of a live frame's delay; an operator's sign of a node near saturation (the /metrics histogram
   * listen_decode_delay_seconds), with the shard that decoded it (its index, or "main").
   */
  onTaskDelay?: (seconds: number, shard: string) => void;
}

/** One codec shard thread's V8 heap, as `CodecPool.threadHeaps()` reads it: the thread's answer and its shard. */
export type ShardHeap = Omit<HeapAnswer, 'ok'> & { shard: number };

/**
 * Stream numbers, unique in the process: the main thread's decoders and sockets (workers/decode.ts imported by the
 * inline shard) are one map for every pool of the process.
 */
let nextStreamKey = 1;

/** The process's codec shards. One per process; `close()` ends every thread. */
export class CodecPool {
  readonly #shards: Shard[];
  /** The main thread's shard and the rule that sends sessions there, when they may decode there (options.inline). */
  readonly #inline: { shard: Shard; admit: (sessions: number) => boolean } | undefined;
  /** A thread of its own for openApart(), never given a session (its thread starts with the first task). */
  readonly #apart: Shard;
  readonly #fill: ShardFill;
  #closed = false;

  constructor(options: CodecPoolOptions = {}) {
    const threads = options.threads ?? Math.max(2, availableParallelism() - 1);
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError('threads must be an integer ≥ 1');
    const shard = (index: number, inline: boolean): Shard =>
      new Shard({
        index,
        inline,
        filename: options.filename ?? new URL('../../workers/decode.js', import.meta.url).href,
        windowMs: options.batchWindowMs ?? BATCH_WINDOW_MS,
        maxHoldMs: options.maxHoldMs ?? MAX_HOLD_MS,
        onTaskDelay: options.onTaskDelay,
      });
    this.#shards = Array.from({ length: threads }, (_, i) => shard(i, false));
    if (options.inline !== undefined) this.#inline = { shard: shard(threads, true), admit: options.inline };
    this.#apart = shard(threads + 1, false);
    this.#fill = new ShardFill(threads, (i) => this.#shards[i]!.loopTimes(), options.fillBusy !== undefined ? { fillBusy: options.fillBusy } : {});
  }

  /** The thread shards, the main thread's after them, and the one apart. */
  #all(): Shard[] {
    return this.#inline ? [...this.#shards, this.#inline.shard, this.#apart] : [...this.#shards, this.#apart];
  }

  /** Number of shards (threads). */
  get threads(): number {
    return this.#shards.length;
  }

  /** Open sessions per shard thread. */
  get load(): number[] {
    return this.#shards.map((s) => s.size);
  }

  /** Exits (crashes) of each shard thread, in shard order; the thread apart's are not counted. */
  get crashes(): number[] {
    return this.#shards.map((s) => s.crashes);
  }

  /** Open sessions decoded on the main thread. */
  get inlineLoad(): number {
    return this.#inline?.shard.size ?? 0;
  }

  /** Decode tasks sent and the stream batches they carried, summed over shards (batches/tasks = batching achieved). */
  get taskStats(): { tasks: number; batches: number } {
    return this.#all().reduce((a, s) => ({ tasks: a.tasks + s.tasks, batches: a.batches + s.batches }), { tasks: 0, batches: 0 });
  }

  /**
   * Opens a session's stream on the first shard not yet busy (the least-loaded once all are). Throws
   * ENG_ERR_CODEC_UNSUPPORTED at once for a codec, rate or channel count we cannot decode, so the caller can refuse
   * the socket (close 1003) before accepting audio.
   */
  open(options: CodecStreamOptions): CodecStream {
    if (this.#closed) throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: options.sessionId });
    const why = checkCodecParams(options);
    if (why !== null) throw new EngineError('ENG_ERR_CODEC_UNSUPPORTED', { reason: why });
    const sizes = this.#shards.map((s) => s.size);
    const inline = this.#inline;
    const shard = inline !== undefined && inline.admit(sizes.reduce((a, b) => a + b, inline.shard.size)) ? inline.shard : this.#shards[this.#fill.pick(sizes)]!;
    return new CodecStream(shard, nextStreamKey++, options);
  }

  /**
   * A stream on a thread no session decodes on: audio a dead codec thread lost, decoded again. The message that ended
   * that thread is among it; decoded here, it ends only this thread again, not the sessions' (nor their sockets).
   */
  openApart(options: CodecStreamOptions): CodecStream {
    if (this.#closed) throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: options.sessionId });
    const why = checkCodecParams(options);
    if (why !== null) throw new EngineError('ENG_ERR_CODEC_UNSUPPORTED', { reason: why });
    return new CodecStream(this.#apart, nextStreamKey++, options);
  }

  /**
   * Each shard thread's V8 heap (used and committed bytes), in shard order; a thread that does not answer (crashed,
   * being replaced) is left out. The main thread's heap metrics do not include these.
   */
  async threadHeaps(): Promise<ShardHeap[]> {
    // A shard no session has used yet has no thread to ask (and asking would start one).
    const answers = await Promise.all(this.#shards.map((s) => (s.started ? s.run({ type: 'heap' }).catch(() => undefined) : undefined)));
    const heaps: ShardHeap[] = [];
    answers.forEach((a, shard) => {
      if (a && a.ok && 'committedBytes' in a) heaps.push({ shard, usedBytes: a.usedBytes, committedBytes: a.committedBytes });
    });
    return heaps;
  }

  /**
   * Asks each shard thread that saw streams close since the last call to give its heap's free memory back
   * (workers/messages.ts TidyTask); answers how many were asked. The inline shard is the main thread's, which
   * engine/runtime/heap-compaction.ts compacts.
   */
  tidyThreads(): number {
    let asked = 0;
    for (const s of this.#shards) {
      if (s.closedSinceTidy === 0) continue;
      s.closedSinceTidy = 0;
      asked++;
      s.run({ type: 'tidy' }).catch(() => undefined);
    }
    return asked;
  }

  /** Drops every stream's queued audio, frees their decoders and sockets and terminates the threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const all = this.#all();
    const streams = all.flatMap((s) => [...s.members] as CodecStream[]);
    await Promise.all(streams.map((s) => s.close({ flush: false })));
    await Promise.all(all.map((s) => s.destroy()));
  }
}
