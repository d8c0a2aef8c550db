// Chooses the STT engine for a session from the engines the Service was given, in preference order.
import type { SttEngine } from './types.js';
import { NullSttEngine } from './null.js';

export class EngineList {
  readonly engines: readonly SttEngine[];

  /** `engines` in preference order; empty means the NullSttEngine (no transcription). */
  constructor(engines: readonly SttEngine[]) {
    this.engines = engines.length > 0 ? engines : [new NullSttEngine()];
  }

  /**
   * The engines that can serve `language`, in the order a session tries them: the one named `preferred` first when it
   * is configured and eligible, then the others in configured order. Empty means the session fails closed.
   */
  candidates(language: string, preferred: string | null): SttEngine[] {
    const eligible = this.engines.filter((e) => e.supports(language));
    const named = preferred ? eligible.find((e) => e.name === preferred) : undefined;
    return named ? [named, ...eligible.filter((e) => e !== named)] : eligible;
  }

  /**
   * The engine for `language`: the one named `preferred` when it is configured and supports the language, else the
   * first that does; undefined when none can serve it (the session then fails closed with stt_failed).
   */
  pick(language: string, preferred: string | null): SttEngine | undefined {
    const named = preferred ? this.engines.find((e) => e.name === preferred && e.supports(language)) : undefined;
    return named ?? this.engines.find((e) => e.supports(language));
  }

  /** Closes every engine, each whether or not another failed; then rejects naming those that failed, with the first's reason. */
  async close(): Promise<void> {
    const results = await Promise.allSettled(this.engines.map((e) => e.close()));
    const failed = this.engines.filter((_, i) => results[i]!.status === 'rejected');
    if (failed.length === 0) return;
    const first = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!.reason as unknown;
    const why = first instanceof Error ? first.message : String(first);
    throw new Error(`speech engines failed to close: ${failed.map((e) => e.name).join(', ')} (${why})`, { cause: first });
  }
}
