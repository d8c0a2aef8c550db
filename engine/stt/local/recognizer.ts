// The `local` speech engine: PocketSphinx (Debian's libpocketsphinx, US English only) in worker threads, one decoder per session.
//
// Rationale: pocketsphinx decodes synchronously and keeps per-utterance state, so each session's decoder lives in
// one thread (workers/stt-local.ts) and every task of that session goes there, as with the codec shards
// (engine/codec/pool.ts). A session keeps at most one task in flight; audio written meanwhile is coalesced into the next.
// Utterances end on finalize() (the VAD gate calls it at the end of each speech region) or at `maxUtteranceMs`.
// Accuracy is modest (about 37 % WER on real conversational speech); it is the offline default, not a provider rival.
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { EngineError } from '../../errors.js';
import { Outcome } from '../../protocol.js';
import { SerialLoop } from '../../runtime/serial-loop.js';
import { DEFAULT_PS_MODEL_DIR } from '../../../native/pocketsphinx.js';
import type { LocalAnswer, LocalSegment, LocalTask } from '../../../workers/stt-messages.js';
import { SttEmitter } from '../stt-emitter.js';
import { destroyLoaded } from '../../runtime/task-thread.js';
import type { SttEngine, SttSegment, SttStream, SttStreamOptions } from '../types.js';

const SAMPLE_RATE_HZ = 16000;

export interface LocalEngineOptions {
  /**
   * Speech threads; each holds the decoders of the sessions pinned to it.
   * @defaultValue 1 (pocketsphinx runs at ~0.2× real time per session; add threads for many sessions)
   */
  threads?: number;
  /** Directory with `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict`. @defaultValue /usr/share/pocketsphinx/model/en-us */
  modelDir?: string;
  /**
   * Longest utterance before it is cut and decoded, in milliseconds. Without the VAD gate (or with speech that never
   * pauses) this bounds latency and memory; a cut can split a word.
   * @defaultValue 15000 (15 seconds)
   */
  maxUtteranceMs?: number;
  /** Worker module; tests may point it elsewhere. @defaultValue dist/workers/stt-local.js */
  filename?: string;
}

/** An error from `open()`: `code` for callers, `reason` and `retryable` as an SttFailure would carry them. */
export class LocalOpenError extends EngineError {
  constructor(
    code: 'ENG_ERR_STT_LANGUAGE_UNSUPPORTED' | 'ENG_ERR_STT_LOCAL_FAILED',
    params: Record<string, string>,
    readonly reason: 'language_unsupported' | 'initialization_failed',
    options: { cause?: unknown } = {},
  ) {
    super(code, params, options);
  }
}

/** @internal one speech thread and the sessions pinned to it. */
class Shard {
  readonly sessions = new Set<LocalStream>();
  readonly #piscina: Piscina<LocalTask, LocalAnswer>;

  constructor(filename: string) {
    this.#piscina = new Piscina<LocalTask, LocalAnswer>({ filename, minThreads: 1, maxThreads: 1, idleTimeout: Infinity });
  }

  run(task: LocalTask, transferList?: ArrayBuffer[]): Promise<LocalAnswer> {
    return this.#piscina.run(task, transferList === undefined ? {} : { transferList });
  }

  destroy(): Promise<void> {
    // Closing a session the thread never opened answers at once.
    return destroyLoaded<LocalTask>(this.#piscina, { type: 'close', sessionId: '' });
  }
}

type Op = { kind: 'audio'; pcm: Int16Array } | { kind: 'flush'; done: () => void };

/** One session's audio through pocketsphinx. Create with `LocalEngine.open()`. */
export class LocalStream extends SttEmitter implements SttStream {
  readonly provider = 'local';
  readonly sessionId: string;
  readonly #shard: Shard;
  #ops: Op[] = [];
  readonly #loop = new SerialLoop({ ready: () => this.#ops.length > 0, step: () => this.#step() });
  #state: 'open' | 'failed' | 'closed' = 'open';
  #closing: Promise<void> | null = null;

  /** @internal built by LocalEngine.open() once the thread created the decoder */
  constructor(shard: Shard, sessionId: string) {
    super();
    this.#shard = shard;
    this.sessionId = sessionId;
  }

  /** Queues 16 kHz mono PCM (copied once when the batch leaves). Ignored after close() or a failure. */
  write(pcm: Int16Array): void {
    if (this.#state !== 'open' || this.#closing !== null || pcm.length === 0) return;
    this.#ops.push({ kind: 'audio', pcm: pcm.slice() }); // a view the codec shard fills again after this call
    this.#loop.kick();
  }

  /** Decodes what is queued, ends the current utterance and resolves after its segments were emitted. */
  finalize(): Promise<void> {
    if (this.#state !== 'open') return Promise.resolve();
    return new Promise<void>((done) => {
      this.#ops.push({ kind: 'flush', done });
      this.#loop.kick();
    });
  }

  /** Drops queued audio, frees the decoder in its thread; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    // Queued flushes still resolve, queued audio is dropped: close() means the words are no longer wanted.
    this.#ops = this.#ops.filter((op) => op.kind === 'flush');
    await this.#loop.idle();
    if (this.#state !== 'closed') {
      this.#state = 'closed';
      await this.#shard.run({ type: 'close', sessionId: this.sessionId }).catch(() => {});
    }
    this.#shard.sessions.delete(this);
  }

  /** Runs the op at the head of the queue (never throws: #run turns a thread's failure into a `failure` event). */
  async #step(): Promise<void> {
    const op = this.#ops[0]!;
    if (op.kind === 'flush') {
      this.#ops.shift();
      if (this.#state === 'open') await this.#run({ type: 'flush', sessionId: this.sessionId });
      op.done();
      return;
    }
    // Coalesce consecutive audio into one task and one buffer, which moves to the thread.
    let n = 0;
    let k = 0;
    while (k < this.#ops.length && this.#ops[k]!.kind === 'audio') n += (this.#ops[k++] as { pcm: Int16Array }).pcm.length;
    const batch = new Int16Array(n);
    let at = 0;
    for (const o of this.#ops.splice(0, k) as { kind: 'audio'; pcm: Int16Array }[]) {
      batch.set(o.pcm, at);
      at += o.pcm.length;
    }
    if (this.#state === 'open') await this.#run({ type: 'audio', sessionId: this.sessionId, pcm: [batch] }, [batch.buffer]);
  }

  async #run(task: LocalTask, transferList?: ArrayBuffer[]): Promise<void> {
    let answer: LocalAnswer;
    try {
      answer = await this.#shard.run(task, transferList);
    } catch {
      answer = { ok: false, code: 'ENG_ERR_STT_LOCAL_FAILED', message: 'speech thread exited' };
    }
    if (answer.ok) {
      this.emitSegments(answer.segments.map(toSttSegment));
      return;
    }
    // The decoder is gone (it threw, or its thread died): the session's words are lost from here on.
    this.#state = 'failed';
    this.#ops = this.#ops.filter((op) => op.kind === 'flush');
    this.emitFailure({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'engine_failed' });
  }
}

function toSttSegment(s: LocalSegment): SttSegment {
  return { text: s.text, speaker: 'SPEAKER_00', start: s.start, end: s.end, words: s.words };
}

/** The embedded default engine. One per process; `close()` ends its threads. */
export class LocalEngine implements SttEngine {
  readonly name = 'local';
  readonly #shards: Shard[];
  readonly #modelDir: string;
  readonly #maxUtteranceSamples: number;
  #closed = false;

  constructor(options: LocalEngineOptions = {}) {
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1 || threads > Math.max(1, availableParallelism())) {
      throw new RangeError('threads must be an integer from 1 to the number of cores');
    }
    const maxUtteranceMs = options.maxUtteranceMs ?? 15000;
    if (!(maxUtteranceMs >= 1000)) throw new RangeError('maxUtteranceMs must be at least 1000');
    this.#maxUtteranceSamples = Math.round((maxUtteranceMs * SAMPLE_RATE_HZ) / 1000);
    this.#modelDir = options.modelDir ?? DEFAULT_PS_MODEL_DIR;
    const filename = options.filename ?? new URL('../../../workers/stt-local.js', import.meta.url).href;
    this.#shards = Array.from({ length: threads }, () => new Shard(filename));
  }

  /** US English only: the model Debian ships (`pocketsphinx-en-us`). `en-US`, `en-GB` etc. are served by it too. */
  supports(language: string): boolean {
    return /^en(-[A-Za-z]{2})?$/.test(language);
  }

  /** Open sessions per thread. */
  get load(): number[] {
    return this.#shards.map((s) => s.sessions.size);
  }

  /** Creates the session's decoder on the least-loaded thread (~0.3 s to load the model). */
  async open(opts: SttStreamOptions): Promise<LocalStream> {
    if (this.#closed) throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: 'engine closed' }, 'initialization_failed');
    if (!this.supports(opts.language)) {
      throw new LocalOpenError('ENG_ERR_STT_LANGUAGE_UNSUPPORTED', { engine: this.name, language: opts.language }, 'language_unsupported');
    }
    if (opts.sampleRateHz !== SAMPLE_RATE_HZ) throw new RangeError('sampleRateHz must be 16000');
    let shard = this.#shards[0]!;
    for (const s of this.#shards) if (s.sessions.size < shard.sessions.size) shard = s;
    let answer: LocalAnswer;
    try {
      answer = await shard.run({ type: 'open', sessionId: opts.sessionId, modelDir: this.#modelDir, maxUtteranceSamples: this.#maxUtteranceSamples });
    } catch (err) {
      throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: 'speech thread failed to start' }, 'initialization_failed', { cause: err });
    }
    if (!answer.ok) throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: answer.message }, 'initialization_failed');
    const stream = new LocalStream(shard, opts.sessionId);
    shard.sessions.add(stream);
    return stream;
  }

  /** Closes every stream (their queued audio is dropped) and ends the threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all(this.#shards.flatMap((s) => [...s.sessions].map((st) => st.close())));
    await Promise.all(this.#shards.map((s) => s.destroy()));
  }
}
