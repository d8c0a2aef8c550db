// The placeholder engine used when no real STT engine is configured: accepts PCM, counts it, emits nothing.
import type { SttEngine, SttStream, SttStreamOptions } from './types.js';
import { SttEmitter } from './stt-emitter.js';

/** A stream that swallows audio. Sessions stay usable (keep-alives, suggested transcripts, lifecycle) without transcription. */
class NullSttStream extends SttEmitter implements SttStream {
  readonly provider = 'none';
  /** Samples written, for tests and logs. */
  samples = 0;
  write(pcm: Int16Array): void {
    this.samples += pcm.length;
  }
  async finalize(): Promise<void> {}
  async close(): Promise<void> {}
}

/** Used when a deployment configures no engine at all: transcription is off, everything else works. */
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
