// A test STT engine: records the PCM each stream receives and emits segments when the test says so.
import { EventEmitter } from 'node:events';
import { SttOpenError, type SttEngine, type SttFailure, type SttSegment, type SttStream, type SttStreamEvents, type SttStreamOptions } from '../../engine/stt/types.js';

export class RecordingSttStream implements SttStream {
  readonly #events = new EventEmitter();
  readonly chunks: Int16Array[] = [];
  samples = 0;
  /** Samples the "provider" answered for, as a remote engine reports them; the session keeps the audio after it. */
  acknowledged = 0;
  finalized = false;
  closed = false;
  constructor(readonly options: SttStreamOptions, readonly provider = 'recording') {}
  write(pcm: Int16Array): void {
    this.chunks.push(pcm.slice()); // a view valid only during the call (SttStream.write)
    this.samples += pcm.length;
  }
  acknowledgedSamples(): number {
    return Math.min(this.acknowledged, this.samples);
  }
  /** Emits segments as the engine would. */
  emit(segments: SttSegment[]): void {
    this.#events.emit('segments', segments);
  }
  /** Reports the engine unusable, as a provider connection lost mid-session would. */
  fail(failure: SttFailure): void {
    this.#events.emit('failure', failure);
  }
  /** When set, finalize() waits for it (a provider slow to answer the last audio). */
  finalizeGate: Promise<void> | undefined;
  async finalize(): Promise<void> {
    this.finalized = true;
    await this.finalizeGate;
    const answer = this.onFinalize?.(this);
    if (answer && answer.length > 0) this.emit(answer);
  }
  /** What the "provider" answers when finalized (the engine's autoAnswer). */
  onFinalize: ((s: RecordingSttStream) => SttSegment[]) | undefined;
  async close(): Promise<void> {
    this.closed = true;
  }
  on<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this {
    this.#events.on(event, listener);
    return this;
  }
  off<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this {
    this.#events.off(event, listener);
    return this;
  }
}

export class RecordingSttEngine implements SttEngine {
  readonly streams: RecordingSttStream[] = [];
  /** When set, open() rejects (an engine that cannot start). */
  failOpen = false;
  /** Rejections open() gives first, one per attempt, before it succeeds (or falls back to failOpen). */
  readonly openErrors: SttOpenError[] = [];
  attempts = 0;
  /** Segments every new stream answers with when finalized (kept-audio transcription in tests). */
  autoAnswer: ((s: RecordingSttStream) => SttSegment[]) | undefined;
  constructor(readonly name = 'recording', readonly languages: readonly string[] | null = null) {}
  supports(language: string): boolean {
    return this.languages === null || this.languages.includes(language);
  }
  async open(opts: SttStreamOptions): Promise<SttStream> {
    this.attempts++;
    const scripted = this.openErrors.shift();
    if (scripted) throw scripted;
    if (this.failOpen) throw Object.assign(new Error('cannot start'), { reason: 'initialization_failed' });
    const s = new RecordingSttStream(opts, this.name);
    s.onFinalize = this.autoAnswer;
    this.streams.push(s);
    return s;
  }
  async close(): Promise<void> {}
}
