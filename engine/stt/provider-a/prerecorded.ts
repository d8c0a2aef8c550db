// provider_a's pre-recorded API (Deepgram `POST /v1/listen` with the audio as the body), for voice messages: one
// request per message, beside the live protocol of stream.ts. Same endpoint path and key as the live one.
import { encodeWav } from '../../audio/wav.js';
import { Outcome } from '../../protocol.js';
import { NOVA3_LANGUAGES } from './languages.js';
import { SttOpenError, type SttFailure } from '../types.js';

export interface ProviderAPrerecordedOptions {
  /** The live endpoint (PROVIDER_A_URL, ws:// or wss://); the pre-recorded one is the same URL over http(s). */
  url: string;
  /** Sent as `Authorization: Token <key>`; never logged. */
  apiKey: string;
  /** @defaultValue 'nova-3' */
  model?: string;
}

/** What a transcription found: the transcript (may be empty) and the language the provider detected, if it did. */
export interface PrerecordedResult {
  text: string;
  language: string | undefined;
}

const RATE_HZ = 16000;

const fail = (outcome: Outcome, reason: string): SttOpenError => new SttOpenError({ outcome, retryable: outcome !== Outcome.CONFIG_ERROR, reason } satisfies SttFailure);

/** The outcome of a refused request: a refused key or account is configuration, the rest the provider's trouble. */
function refusal(status: number): SttOpenError {
  if (status === 401 || status === 402 || status === 403) return fail(Outcome.CONFIG_ERROR, `refused_${status}`);
  return fail(Outcome.UPSTREAM_ERROR, `status_${status}`);
}

export class ProviderAPrerecorded {
  readonly name = 'provider_a';
  readonly model: string;
  readonly #endpoint: URL;
  readonly #apiKey: string;

  constructor(options: ProviderAPrerecordedOptions) {
    if (!options.apiKey) throw new RangeError('apiKey is required');
    const url = new URL(options.url);
    if (url.protocol !== 'wss:' && url.protocol !== 'ws:') throw new RangeError('url must be ws: or wss:');
    url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
    this.#endpoint = url;
    this.#apiKey = options.apiKey;
    this.model = options.model ?? 'nova-3';
  }

  /** Nova-3's languages and `multi` (then the provider detects the language). */
  supports(language: string): boolean {
    return NOVA3_LANGUAGES.has(language);
  }

  /**
   * Transcribes 16 kHz mono PCM. Rejects with an SttOpenError whose failure says the outcome (never the provider's
   * words); an abort through `signal` rejects with the signal's reason.
   */
  async transcribe(pcm: Int16Array, language: string, signal: AbortSignal): Promise<PrerecordedResult> {
    const url = new URL(this.#endpoint);
    url.searchParams.set('model', this.model);
    url.searchParams.set('smart_format', 'true');
    url.searchParams.set('punctuate', 'true');
    // A file has one language: `multi` asks the provider to detect it, as the compatible system does.
    if (language === 'multi') url.searchParams.set('detect_language', 'true');
    else url.searchParams.set('language', language);
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Token ${this.#apiKey}`, 'content-type': 'audio/wav' },
        // The WAV container tells the provider the format, so no `encoding` is needed.
        body: encodeWav(pcm, RATE_HZ),
        signal,
      });
    } catch {
      if (signal.aborted) throw signal.reason;
      throw fail(Outcome.UPSTREAM_ERROR, 'connection_failed');
    }
    let body: unknown;
    try {
      const text = await res.text();
      if (!res.ok) throw refusal(res.status);
      body = JSON.parse(text);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err instanceof SttOpenError) throw err;
      throw fail(Outcome.UPSTREAM_ERROR, 'unreadable_answer');
    }
    return readAnswer(body);
  }
}

/** The transcript of the first channel's best alternative; an answer without one is the provider's failure. */
function readAnswer(body: unknown): PrerecordedResult {
  const channel = (body as { results?: { channels?: unknown[] } } | null)?.results?.channels?.[0] as
    | { alternatives?: { transcript?: unknown }[]; detected_language?: unknown }
    | undefined;
  const transcript = channel?.alternatives?.[0]?.transcript;
  if (typeof transcript !== 'string') throw fail(Outcome.UPSTREAM_ERROR, 'unreadable_answer');
  const detected = channel?.detected_language;
  return { text: transcript, language: typeof detected === 'string' && detected !== '' ? detected : undefined };
}
