// The engines a voice message can go to, in the node's preference order: provider_a through its pre-recorded API,
// every other engine (provider_b's realtime socket, `local`) through one of its streams fed the whole message at once.
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import { Outcome } from '../protocol.js';
import { ProviderAPrerecorded, type PrerecordedResult } from '../stt/provider-a/prerecorded.js';
import { SttOpenError, type SttEngine, type SttFailure, type SttSegment } from '../stt/types.js';
import { SAMPLE_RATE_HZ } from './audio.js';

/** One engine as voice messages use it. */
export interface VoiceEngine {
  /** Provider label (`stt_provider`). */
  readonly name: string;
  /** Model label (`stt_model`). */
  readonly model: string;
  supports(language: string): boolean;
  /**
   * Transcribes 16 kHz mono PCM. Rejects with an SttOpenError whose failure carries the outcome, or with the
   * signal's reason once it is aborted.
   */
  transcribe(pcm: Int16Array, language: string, signal: AbortSignal): Promise<PrerecordedResult>;
}

/** Audio per provider message when a stream is fed a whole message, in milliseconds: a second, far above real time. */
const FEED_MS = 1000;
const FEED_SAMPLES = (SAMPLE_RATE_HZ * FEED_MS) / 1000;

/** Model labels of the engines that do not say theirs. */
const LOCAL_MODEL = 'pocketsphinx-en-us';

/**
 * A streaming engine fed a message faster than real time: all of it written, finalized, closed; the words come
 * back as the stream's segments.
 *
 * Rationale (provider_b): its realtime socket takes audio faster than real time and answers as soon as it has
 * heard it, in one connection; its async file API needs an upload, a job, polling and two deletes, five or more
 * round trips and a poll interval of added latency, and keeps the audio at the provider until it is deleted.
 */
export class StreamedVoiceEngine implements VoiceEngine {
  readonly name: string;
  readonly model: string;

  constructor(private readonly engine: SttEngine, model: string) {
    this.name = engine.name;
    this.model = model;
  }

  supports(language: string): boolean {
    return this.engine.supports(language);
  }

  async transcribe(pcm: Int16Array, language: string, signal: AbortSignal): Promise<PrerecordedResult> {
    let stream;
    try {
      stream = await this.engine.open({ language, sampleRateHz: SAMPLE_RATE_HZ, sessionId: `voice-${randomUUID()}` });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err instanceof SttOpenError) throw err;
      throw new SttOpenError({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'initialization_failed' });
    }
    const segments: SttSegment[] = [];
    let failure: SttFailure | undefined;
    stream.on('segments', (s) => segments.push(...s));
    stream.on('failure', (f) => (failure ??= f));
    const aborted = new Promise<never>((_, reject) => {
      const stop = (): void => {
        void stream.close().catch(() => undefined);
        reject(signal.reason);
      };
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
    });
    aborted.catch(() => undefined);
    for (let at = 0; at < pcm.length && failure === undefined; at += FEED_SAMPLES) stream.write(pcm.subarray(at, at + FEED_SAMPLES));
    await Promise.race([stream.finalize().then(() => stream.close()), aborted]);
    if (failure !== undefined) throw new SttOpenError(failure);
    // A remote stream that closed before its provider covered all the audio with final words did not finish.
    const acked = stream.acknowledgedSamples?.();
    if (acked !== undefined && acked < pcm.length) throw new SttOpenError({ outcome: Outcome.TIMEOUT, retryable: true, reason: 'unfinished' });
    return { text: segments.map((s) => s.text).join(' '), language: undefined };
  }
}

/**
 * The node's engines for voice messages, in its preference order: provider_a's pre-recorded API when its key is
 * configured, each other engine of the live list as it is (the null engine left out).
 */
export function voiceEngines(config: Config, live: readonly SttEngine[]): VoiceEngine[] {
  const out: VoiceEngine[] = [];
  for (const engine of live) {
    if (engine.name === 'none') continue;
    if (engine.name === 'provider_a') {
      if (config.providerAApiKey !== undefined) out.push(new ProviderAPrerecorded({ url: config.providerAUrl, apiKey: config.providerAApiKey }));
      continue;
    }
    const model = (engine as { model?: unknown }).model;
    out.push(new StreamedVoiceEngine(engine, typeof model === 'string' ? model : engine.name === 'local' ? LOCAL_MODEL : 'unknown'));
  }
  return out;
}
