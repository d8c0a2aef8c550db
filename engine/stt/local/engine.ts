// The embedded default engine: PocketSphinx (`local`) behind the Silero speech gate, its speech thread started on first use.
import type { Clock } from '../../clock.js';
import type { Scheduler } from '../../scheduler.js';
import type { SttEngine, SttStream, SttStreamOptions } from '../types.js';
import { LocalEngine } from './speech.js';

export interface LocalGatedOptions {
  /** Keep silence away from the recognizer (VAD_GATE). @defaultValue true */
  readonly vadGate: boolean;
  /** The service's scheduler and clock: a stream whose audio stops ends its utterance on them. */
  readonly scheduler?: Scheduler;
  readonly clock?: Clock;
}

/**
 * Rationale: a service that never hears English audio (or runs ROLE=api) should not pay for a speech thread and its
 * model loads at start-up, so the engine and its thread are created by the first session that needs them.
 */
export class LocalGatedEngine implements SttEngine {
  readonly name = 'local';
  #engine: LocalEngine | undefined;

  constructor(private readonly opts: LocalGatedOptions) {}

  supports(language: string): boolean {
    // Same rule as LocalEngine, without constructing it.
    return /^en(-[A-Za-z]{2})?$/.test(language);
  }

  open(opts: SttStreamOptions): Promise<SttStream> {
    const { vadGate, scheduler, clock } = this.opts;
    this.#engine ??= new LocalEngine({ ...(vadGate ? { gate: {} } : {}), ...(scheduler && clock ? { scheduler, clock } : {}) });
    return this.#engine.open(opts);
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.#engine?.close()]);
  }
}
