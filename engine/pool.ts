// The codec shards: one-thread Piscina pools that decode live audio; each session is pinned to one shard.
//
// Rationale: Opus, LC3 and AAC decoders carry state from frame to frame, so a session's decoders live in one
// thread (workers/decode.ts) and every task of that session goes there. A session is in at most one decode task
// at a time; frames pushed meanwhile wait and leave together in the next one. A shard keeps two tasks in flight and
// each task carries every session that had audio waiting. There is no timer: at low load each frame leaves alone
// (lowest latency), at high load one thread hop serves many sessions and the per-task cost is shared.
import { EventEmitter } from 'node:events';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { EngineError } from './errors.js';
import {
  checkCodecParams,
  type CodecAnswer,
  type CodecParams,
  type CodecTask,
  type DecodeTask,
  type FailAnswer,
  type ManyAnswer,
  type PcmAnswer,
} from '../workers/messages.js';

export { CODECS, CODEC_SAMPLE_RATES_HZ, OUTPUT_SAMPLE_RATE_HZ, type Codec, type CodecParams } from '../workers/messages.js';

export interface CodecPoolOptions {
  /**
   * Codec shards, one thread each (CODEC_THREADS, read by engine/config.ts and passed in here).
   * @defaultValue `os.availableParallelism() - 1`, at least 1
   */
  threads?: number;
  /**
   * Most messages one decode task carries; more wait for the next task. Bounds a task's run time.
   * @defaultValue 1000 (10 s of 10 ms frames)
   */
  maxBatchMessages?: number;
  /** Worker module; tests point it at a fixture. @defaultValue dist/workers/decode.js */
  filename?: string;
}

export interface CodecStreamOptions extends CodecParams {
  /** The session's id; one stream per session. */
  sessionId: string;
}

/** What came with one batch of PCM. */
export interface PcmInfo {
  /** Frames decoded in this batch (LC3 frames split out of messages count one each). */
  frames: number;
  /** Frames in this batch that failed to decode: skipped, concealed where the codec can. */
  corruptFrames: number;
  /** True when the shard's thread had been replaced and the decoders were re-created for this batch. */
  recreated: boolean;
  /** Always 16000: every PCM array is 16 kHz mono Int16. */
  sampleRate: number;
  /** True for the last batch, the decoders' tail at `close()`. */
  final: boolean;
}

export interface CodecStreamStats {
  /** Messages pushed. */
  messages: number;
  frames: number;
  corruptFrames: number;
  /** Messages lost with a crashed thread (their batch was in flight) or a failed decoder. */
  lostMessages: number;
  /** Samples out per channel, at 16 kHz. */
  samples: number[];
  /** Decode tasks run. */
  tasks: number;
  /** Times the decoders were re-created after a thread crash or decoder failure. */
  recreations: number;
}

export interface CodecStreamEvents {
  /** 16 kHz mono Int16 PCM, one array per channel (index 0 = channel id 0x01). */
  pcm: [pcm: Int16Array[], info: PcmInfo];
  /** A batch was lost (thread crash, decoder failure). The stream stays open; the next batch re-creates the decoders. */
  failure: [error: EngineError, lostMessages: number];
  /** After `close()` finished; no event follows. */
  close: [];
}

function rebuild(answer: { code: string; message: string }): EngineError {
  const code = answer.code === 'ENG_ERR_CODEC_UNSUPPORTED' || answer.code === 'ENG_ERR_CODEC_FAILED' ? answer.code : 'ENG_ERR_INTERNAL';
  return new EngineError(code, { reason: answer.message });
}

/** One session's audio through its shard. Create with `CodecPool.open()`. */
export class CodecStream extends EventEmitter<CodecStreamEvents> {
  readonly sessionId: string;
  readonly params: Readonly<CodecParams>;
  readonly stats: CodecStreamStats;
  /** Resolves once the shard created the decoders; rejects with an EngineError if it could not. */
  readonly ready: Promise<void>;
  readonly #shard: Shard;
  #pending: Uint8Array[] = [];
  /** The open task ended (either way): decode batches may go. */
  #opened = false;
  /** @internal part of a shard task in flight, or waiting in the shard's queue. */
  scheduled = false;
  #idleWaiters: (() => void)[] = [];
  #state: 'open' | 'closing' | 'closed' = 'open';

  /** @internal built by CodecPool.open() */
  constructor(shard: Shard, options: CodecStreamOptions) {
    super();
    this.#shard = shard;
    this.sessionId = options.sessionId;
    this.params = Object.freeze({ codec: options.codec, sampleRate: options.sampleRate, channels: options.channels });
    this.stats = { messages: 0, frames: 0, corruptFrames: 0, lostMessages: 0, samples: new Array<number>(options.channels).fill(0), tasks: 0, recreations: 0 };
    const open = shard.run({ type: 'open', sessionId: this.sessionId, ...this.params }).then((a) => {
      if (!a.ok) throw rebuild(a as FailAnswer);
    });
    this.ready = open;
    // Frames pushed before the decoders exist wait for the open task (a failed open still lets them go: the
    // thread re-creates the decoders or answers with the failure).
    const opened = (): void => {
      this.#opened = true;
      this.#wake();
    };
    open.then(opened, opened);
  }

  /** Shard (thread) index the session is pinned to. */
  get shard(): number {
    return this.#shard.index;
  }

  /**
   * Queues one WebSocket message (for two channels: channel-id byte first). The stream takes ownership: when the
   * message spans its whole ArrayBuffer that buffer is moved to the thread (detached here), otherwise it is copied
   * once. Keep-alive messages (≤ 2 bytes, SPEC) are the session layer's to drop.
   */
  push(message: Uint8Array): void {
    if (this.#state !== 'open') throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: this.sessionId });
    const own =
      message.byteOffset === 0 && message.byteLength === message.buffer.byteLength && message.buffer instanceof ArrayBuffer
        ? message
        : message.slice();
    this.#pending.push(own);
    this.stats.messages++;
    this.#wake();
  }

  /**
   * Ends the stream. With `flush` (default) the queued messages are decoded and the decoders' tail is emitted as a
   * final 'pcm'; without it queued audio is dropped and the decoders are freed at once. Emits 'close' and resolves.
   */
  async close(options: { flush?: boolean } = {}): Promise<void> {
    const flush = options.flush ?? true;
    if (this.#state === 'closed') return;
    if (this.#state === 'closing') {
      await new Promise<void>((resolve) => this.once('close', resolve));
      return;
    }
    this.#state = 'closing';
    if (!flush) this.#pending = [];
    if (!this.#opened || this.scheduled || this.#pending.length > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    try {
      const answer = await this.#shard.run({ type: 'close', sessionId: this.sessionId, flush });
      if (answer.ok && 'pcm' in answer && answer.pcm.some((p) => p.length > 0)) this.#emitPcm(answer, true);
    } catch {
      // The thread died while closing: its decoders went with it, nothing is left to flush.
    }
    this.#state = 'closed';
    this.#shard.sessions.delete(this);
    this.emit('close');
  }

  /** @internal the shard takes up to `max` queued messages for its next task. */
  take(max: number): DecodeTask {
    const messages = this.#pending.length <= max ? this.#pending : this.#pending.slice(0, max);
    this.#pending = this.#pending.length <= max ? [] : this.#pending.slice(max);
    this.stats.tasks++;
    return { type: 'decode', sessionId: this.sessionId, ...this.params, messages };
  }

  /** @internal the shard's answer for this stream's part of a task (or the error that lost it). */
  settle(answer: PcmAnswer | FailAnswer | Error, messages: number): void {
    this.scheduled = false;
    if (answer instanceof Error) this.#lost(new EngineError('ENG_ERR_CODEC_FAILED', { reason: 'codec thread exited' }, { cause: answer }), messages);
    else if (answer.ok) this.#emitPcm(answer, false);
    else this.#lost(rebuild(answer), messages);
    this.#wake();
  }

  #wake(): void {
    if (!this.#opened || this.scheduled) return;
    if (this.#pending.length > 0) {
      this.scheduled = true;
      this.#shard.schedule(this);
      return;
    }
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  #emitPcm(answer: PcmAnswer, final: boolean): void {
    this.stats.frames += answer.frames;
    this.stats.corruptFrames += answer.corruptFrames;
    if (answer.recreated) this.stats.recreations++;
    answer.pcm.forEach((p, i) => (this.stats.samples[i] = (this.stats.samples[i] ?? 0) + p.length));
    this.emit('pcm', answer.pcm, { frames: answer.frames, corruptFrames: answer.corruptFrames, recreated: answer.recreated, sampleRate: 16000, final });
  }

  #lost(error: EngineError, messages: number): void {
    this.stats.lostMessages += messages;
    this.emit('failure', error, messages);
  }
}

/** Decode tasks one shard keeps in flight: the thread never waits for the main thread between two. */
const TASKS_IN_FLIGHT = 2;

/** @internal one codec thread and the sessions pinned to it. */
class Shard {
  readonly sessions = new Set<CodecStream>();
  readonly #piscina: Piscina<CodecTask, CodecAnswer>;
  readonly #maxBatch: number;
  /** Streams with audio waiting, in the order they asked. */
  #waiting: CodecStream[] = [];
  #inFlight = 0;
  /** Thread exits seen (crashes); Piscina replaces the thread. */
  crashes = 0;
  /** Decode tasks sent, and stream batches they carried (their ratio is the batching achieved). */
  tasks = 0;
  batches = 0;

  constructor(
    readonly index: number,
    filename: string,
    maxBatch: number,
  ) {
    this.#maxBatch = maxBatch;
    this.#piscina = new Piscina<CodecTask, CodecAnswer>({
      filename,
      minThreads: 1,
      maxThreads: 1,
      // Async tasks (AAC waits on ffmpeg) interleave; a stream is in at most one task, so its batches stay in order.
      concurrentTasksPerWorker: 256,
      idleTimeout: Infinity,
      // The thread must keep its event loop running between tasks (ffmpeg pipes), so no Atomics.wait.
      atomics: 'disabled',
    });
    this.#piscina.on('error', () => {
      this.crashes++;
    });
  }

  run(task: CodecTask, transferList?: ArrayBuffer[]): Promise<CodecAnswer> {
    return this.#piscina.run(task, transferList === undefined ? {} : { transferList });
  }

  /** A stream has audio waiting: it leaves with the next task (at once when fewer than two are in flight). */
  schedule(stream: CodecStream): void {
    this.#waiting.push(stream);
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < TASKS_IN_FLIGHT && this.#waiting.length > 0) {
      // Every waiting stream rides in this task, within the message budget; the rest wait for the next one.
      const streams: CodecStream[] = [];
      const items: DecodeTask[] = [];
      let budget = this.#maxBatch;
      while (this.#waiting.length > 0 && budget > 0) {
        const stream = this.#waiting.shift()!;
        const item = stream.take(budget);
        budget -= item.messages.length;
        streams.push(stream);
        items.push(item);
      }
      this.#inFlight++;
      this.tasks++;
      this.batches += items.length;
      const transfer = items.flatMap((i) => i.messages.map((m) => m.buffer as ArrayBuffer));
      this.run({ type: 'decodeMany', items }, transfer).then(
        (answer) => {
          const many = answer as ManyAnswer | FailAnswer;
          streams.forEach((s, i) => s.settle(many.ok ? many.items[i]! : many, items[i]!.messages.length));
        },
        // The thread died with the task (Piscina starts a new one): these batches are lost, the sessions are not.
        (err: unknown) => streams.forEach((s, i) => s.settle(err instanceof Error ? err : new Error(String(err)), items[i]!.messages.length)),
      ).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  destroy(): Promise<void> {
    return this.#piscina.destroy();
  }
}

/** The process's codec shards. One per process; `close()` ends every thread. */
export class CodecPool {
  readonly #shards: Shard[];
  readonly #maxBatch: number;
  #closed = false;

  constructor(options: CodecPoolOptions = {}) {
    const threads = options.threads ?? Math.max(1, availableParallelism() - 1);
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError('threads must be an integer ≥ 1');
    this.#maxBatch = options.maxBatchMessages ?? 1000;
    const filename = options.filename ?? new URL('../workers/decode.js', import.meta.url).href;
    this.#shards = Array.from({ length: threads }, (_, i) => new Shard(i, filename, this.#maxBatch));
  }

  /** Number of shards (threads). */
  get threads(): number {
    return this.#shards.length;
  }

  /** Open sessions per shard. */
  get load(): number[] {
    return this.#shards.map((s) => s.sessions.size);
  }

  /** Decode tasks sent and the stream batches they carried, summed over shards (batches/tasks = batching achieved). */
  get taskStats(): { tasks: number; batches: number } {
    return this.#shards.reduce((a, s) => ({ tasks: a.tasks + s.tasks, batches: a.batches + s.batches }), { tasks: 0, batches: 0 });
  }

  /**
   * Opens a session's stream on the least-loaded shard. Throws ENG_ERR_CODEC_UNSUPPORTED at once for a codec,
   * rate or channel count we cannot decode, so the caller can refuse the socket (close 1003) before accepting audio.
   */
  open(options: CodecStreamOptions): CodecStream {
    if (this.#closed) throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: options.sessionId });
    const why = checkCodecParams(options);
    if (why !== null) throw new EngineError('ENG_ERR_CODEC_UNSUPPORTED', { reason: why });
    let shard = this.#shards[0]!;
    for (const s of this.#shards) if (s.sessions.size < shard.sessions.size) shard = s;
    const stream = new CodecStream(shard, options);
    shard.sessions.add(stream);
    return stream;
  }

  /** Test-only: kills shard `index`'s thread (Piscina replaces it; its sessions re-create their decoders). */
  async crashShard(index: number): Promise<void> {
    await this.#shards[index]?.run({ type: 'crash' }).catch(() => {});
  }

  /** Drops every stream's queued audio, frees their decoders and terminates the threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const streams = this.#shards.flatMap((s) => [...s.sessions]);
    await Promise.all(streams.map((s) => s.close({ flush: false })));
    await Promise.all(this.#shards.map((s) => s.destroy()));
  }
}
