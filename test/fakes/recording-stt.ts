// A test STT engine: records the PCM each stream receives and emits segments when the test says so.
import { EventEmitter } from 'node:events';
import type { SttEngine, SttSegment, SttStream, SttStreamEvents, SttStreamOptions } from '../../engine/stt/types.js';

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
  readonly name = 'recording';
  readonly streams: RecordingSttStream[] = [];
  supports(): boolean {
    return true;
  }
  async open(opts: SttStreamOptions): Promise<SttStream> {
    const s = new RecordingSttStream(opts);
    this.streams.push(s);
    return s;
  }
  async close(): Promise<void> {}
}
