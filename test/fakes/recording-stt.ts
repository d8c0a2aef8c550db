// A test STT engine: records the PCM each stream receives and emits segments when the test says so.
import { EventEmitter } from 'node:events';
import type { SttEngine, SttFailure, SttSegment, SttStream, SttStreamEvents, SttStreamOptions } from '../../engine/stt/types.js';

export class RecordingSttStream implements SttStream {
  readonly provider = 'recording';
  readonly #events = new EventEmitter();
  readonly chunks: Int16Array[] = [];
  samples = 0;
  finalized = false;
  closed = false;
  constructor(readonly options: SttStreamOptions) {}
  write(pcm: Int16Array): void {
    this.chunks.push(pcm);
    this.samples += pcm.length;
  }
  /** Emits segments as the engine would. */
  emit(segments: SttSegment[]): void {
    this.#events.emit('segments', segments);
  }
  /** Reports the engine unusable, as a provider connection lost mid-session would. */
  fail(failure: SttFailure): void {
    this.#events.emit('failure', failure);
  }
  async finalize(): Promise<void> {
    this.finalized = true;
  }
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
  constructor(readonly name = 'recording', readonly languages: readonly string[] | null = null) {}
  supports(language: string): boolean {
    return this.languages === null || this.languages.includes(language);
  }
  async open(opts: SttStreamOptions): Promise<SttStream> {
    if (this.failOpen) throw Object.assign(new Error('cannot start'), { reason: 'initialization_failed' });
    const s = new RecordingSttStream(opts);
    this.streams.push(s);
    return s;
  }
  async close(): Promise<void> {}
}
