// The embedded default engine: PocketSphinx (`local`) behind the Silero speech gate, with its threads started on first use.
import type { SttEngine, SttStream, SttStreamOptions } from '../types.js';
import { LocalEngine } from './recognizer.js';
import { VadPool, withVadGate } from './vad-gate.js';

export interface LocalGatedOptions {
  /** Keep silence away from the recogniser (VAD_GATE). @defaultValue true */
  readonly vadGate: boolean;
}

/**
 * Rationale: a service that never hears English audio (or runs ROLE=api) should not pay for a PocketSphinx thread,
 * a model load and an onnxruntime thread at start-up, so both are created by the first session that needs them.
 */
export class LocalGatedEngine implements SttEngine {
  readonly name = 'local';
  #engine: LocalEngine | undefined;
  #vad: VadPool | undefined;

  constructor(private readonly opts: LocalGatedOptions) {}

  supports(language: string): boolean {
    // Same rule as LocalEngine, without constructing it.
    return /^en(-[A-Za-z]{2})?$/.test(language);
  }

  async open(opts: SttStreamOptions): Promise<SttStream> {
    this.#engine ??= new LocalEngine();
    const stream = await this.#engine.open(opts);
    if (!this.opts.vadGate) return stream;
    this.#vad ??= new VadPool();
    return withVadGate(stream, { pool: this.#vad });
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.#engine?.close(), this.#vad?.close()]);
  }
}
