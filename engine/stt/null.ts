// The placeholder engine used when no real STT engine is configured: accepts PCM, counts it, emits nothing.
import { EventEmitter } from 'node:events';
import type { SttEngine, SttStream, SttStreamEvents, SttStreamOptions } from './types.js';

/** A stream that swallows audio. Sessions stay usable (keep-alives, suggested transcripts, lifecycle) without transcription. */
class NullSttStream implements SttStream {
  readonly provider = 'none';
  readonly #events = new EventEmitter();
  /** Samples written, for tests and logs. */
  samples = 0;
  write(pcm: Int16Array): void {
    this.samples += pcm.length;
  }
  async finalize(): Promise<void> {}
  async close(): Promise<void> {
    this.#events.removeAllListeners();
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

/** Until the `local` engine lands this is the default: transcription is off, everything else works. */
export class NullSttEngine implements SttEngine {
  readonly name = 'none';
  supports(): boolean {
    return true;
  }
  async open(_opts: SttStreamOptions): Promise<SttStream> {
    return new NullSttStream();
  }
  async close(): Promise<void> {}
}
