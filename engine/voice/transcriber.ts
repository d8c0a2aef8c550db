// A voice message from PCM to an outcome: the engine chosen by language (failing closed), the speech gate, the
// provider call under a deadline, and every way it can fail mapped onto the closed outcome vocabulary.
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import { Outcome } from '../protocol.js';
import { SttOpenError } from '../stt/types.js';
import type { VoiceMetrics } from '../node/metrics.js';
import { AudioInputError, SAMPLE_RATE_HZ } from './audio.js';
import type { VoiceEngine } from './engines.js';
import { VoiceFailure, providerLabel, type FailureOutcome } from './outcome.js';
import type { SpeechCheck, SpeechVerdict } from './speech-check.js';
import { readVoiceUpload, type VoiceQuery, type VoiceUpload } from './upload.js';
import type { FileDecoder } from './file-decoder.js';

/** How long a provider has to transcribe one message, in milliseconds (a 15-minute file takes a provider seconds). */
export const VOICE_TIMEOUT_MS = 60_000;

/** A language code as clients send them (`en`, `pt-BR`, `zh-Hant`), or `multi`. */
const LANGUAGE = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$/;

/** A voice message that went through: text, or silence the gate found. */
export interface VoiceResult {
  transcript: string;
  language: string;
  stt_provider: string;
  stt_model: string;
  outcome: typeof Outcome.SUCCESS | typeof Outcome.EXPECTED_SILENCE;
}

export interface VoiceTranscriberOptions {
  /** In preference order. */
  engines: readonly VoiceEngine[];
  check: SpeechCheck;
  scheduler: Scheduler;
  logger: Logger;
  metrics: VoiceMetrics;
  /** @defaultValue VOICE_TIMEOUT_MS */
  timeoutMs?: number;
  /** Decodes uploads off the main thread (the service gives one); without it they decode on the calling thread. */
  decoder?: FileDecoder;
}

const FAILURES: ReadonlySet<string> = new Set<FailureOutcome>([Outcome.INVALID_INPUT, Outcome.EMPTY_UNEXPECTED, Outcome.UPSTREAM_ERROR, Outcome.CONFIG_ERROR, Outcome.TIMEOUT]);

/** Why a deadline aborted a provider call (told apart from a client that left). */
class Deadline extends Error {}

export class VoiceTranscriber {
  readonly #o: VoiceTranscriberOptions;

  constructor(options: VoiceTranscriberOptions) {
    this.#o = options;
  }

  /**
   * The language to transcribe in: the one asked for (`auto` and `multi` mean detection), else the user's own,
   * else `multi` when an engine detects languages, else `en`. Throws invalid_input for a code that is not one.
   */
  language(requested: string | undefined, preferred: string | null): string {
    const asked = requested?.trim();
    if (asked !== undefined && asked !== '') {
      if (asked === 'auto' || asked === 'multi') return 'multi';
      if (!LANGUAGE.test(asked)) throw new VoiceFailure(Outcome.INVALID_INPUT, undefined, 'language must be a language code such as en or pt-BR, or multi');
      return asked;
    }
    if (preferred) return preferred;
    return this.#o.engines.some((e) => e.supports('multi')) ? 'multi' : 'en';
  }

  /**
   * One request of either voice route: the upload decoded, its language settled (`preferred` asked only when the
   * request names none), the message transcribed. Throws VoiceFailure, counted like every other outcome.
   */
  async handle(
    request: { contentType: string | undefined; query: VoiceQuery; body: Uint8Array | undefined; nowMs: number },
    preferred: () => Promise<string | null>,
    signal?: AbortSignal,
  ): Promise<VoiceResult> {
    let pcm: Int16Array;
    let language: string;
    let speech: SpeechVerdict | undefined;
    try {
      const upload = await this.#read(request);
      pcm = upload.pcm;
      speech = upload.speech;
      const asked = upload.language?.trim();
      language = this.language(asked, asked ? null : await preferred());
    } catch (err) {
      if (err instanceof VoiceFailure) this.#o.metrics.outcomes.inc({ provider: err.body.provider, outcome: err.outcome });
      throw err;
    }
    return this.transcribe(pcm, language, signal, speech);
  }

  async #read(request: { contentType: string | undefined; query: VoiceQuery; body: Uint8Array | undefined; nowMs: number }): Promise<VoiceUpload & { speech?: SpeechVerdict }> {
    const { decoder } = this.#o;
    if (decoder === undefined) return readVoiceUpload(request.contentType, request.query, request.body, request.nowMs);
    try {
      return await decoder.voice(request.contentType, request.query, request.body, request.nowMs, this.#o.check.params);
    } catch (err) {
      if (err instanceof AudioInputError) throw new VoiceFailure(Outcome.INVALID_INPUT, undefined, err.reason);
      throw err;
    }
  }

  /**
   * Transcribes a message; throws VoiceFailure. `signal` aborts it (the client left). `speech`: the speech gate's
   * verdict when the decoder's thread already ran it; otherwise the gate runs here.
   */
  async transcribe(pcm: Int16Array, language: string, signal?: AbortSignal, speech?: SpeechVerdict): Promise<VoiceResult> {
    const { metrics, logger } = this.#o;
    const engine = this.#o.engines.find((e) => e.supports(language));
    try {
      if (engine === undefined) throw new VoiceFailure(Outcome.CONFIG_ERROR, undefined, 'No transcription provider on this server serves this language.');
      if (pcm.length === 0) throw new VoiceFailure(Outcome.INVALID_INPUT, engine.name, 'The audio is empty.');
      const verdict = speech ?? (await this.#o.check.check(pcm));
      const base = { language, stt_provider: providerLabel(engine.name), stt_model: engine.model };
      if (verdict === 'silence') {
        metrics.outcomes.inc({ provider: base.stt_provider, outcome: Outcome.EXPECTED_SILENCE });
        return { transcript: '', ...base, outcome: Outcome.EXPECTED_SILENCE };
      }
      // A detector that failed says nothing: the audio goes to the provider, and an empty answer is then unexpected.
      if (verdict === 'failed') {
        metrics.gateFailures.inc();
        logger.warn({ provider: base.stt_provider }, 'voice speech gate failed: transcribing ungated');
      }
      const result = await this.#call(engine, pcm, language, signal);
      const transcript = result.text.replace(/\s+/g, ' ').trim();
      if (transcript === '') throw new VoiceFailure(Outcome.EMPTY_UNEXPECTED, engine.name);
      metrics.outcomes.inc({ provider: base.stt_provider, outcome: Outcome.SUCCESS });
      metrics.audioSeconds.inc({ provider: base.stt_provider }, pcm.length / SAMPLE_RATE_HZ);
      return { transcript, ...base, language: result.language ?? language, outcome: Outcome.SUCCESS };
    } catch (err) {
      const failure = err instanceof VoiceFailure ? err : new VoiceFailure(Outcome.UPSTREAM_ERROR, engine?.name);
      metrics.outcomes.inc({ provider: failure.body.provider, outcome: failure.outcome });
      if (!(err instanceof VoiceFailure)) logger.error({ err: { name: (err as Error)?.name } }, 'voice transcription failed unexpectedly');
      throw failure;
    }
  }

  /** The provider call under the deadline; its failures as VoiceFailures. */
  async #call(engine: VoiceEngine, pcm: Int16Array, language: string, signal: AbortSignal | undefined): Promise<{ text: string; language: string | undefined }> {
    const { scheduler, logger } = this.#o;
    const ac = new AbortController();
    const timer = scheduler.after(this.#o.timeoutMs ?? VOICE_TIMEOUT_MS, () => ac.abort(new Deadline()));
    const left = (): void => ac.abort(signal?.reason);
    signal?.addEventListener('abort', left, { once: true });
    try {
      return await engine.transcribe(pcm, language, ac.signal);
    } catch (err) {
      if (err instanceof Deadline) throw new VoiceFailure(Outcome.TIMEOUT, engine.name);
      if (err instanceof SttOpenError) {
        const outcome = FAILURES.has(err.failure.outcome) ? (err.failure.outcome as FailureOutcome) : Outcome.UPSTREAM_ERROR;
        logger.warn({ provider: providerLabel(engine.name), outcome, reason: err.failure.reason }, 'voice transcription failed');
        throw new VoiceFailure(outcome, engine.name);
      }
      throw new VoiceFailure(Outcome.UPSTREAM_ERROR, engine.name);
    } finally {
      scheduler.cancel(timer);
      signal?.removeEventListener('abort', left);
    }
  }

  /** Ends the speech gate's thread. */
  close(): Promise<void> {
    return this.#o.check.close();
  }
}
