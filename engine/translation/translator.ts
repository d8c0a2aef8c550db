// The node's translator of live transcripts: sentences to an OpenAI-compatible model, answers cached by sentence,
// a bound on requests in flight for the whole node, and a timeout on the scheduler's clock.
import { LazyOpenAI, requestFailure } from '../openai-client.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import { primaryLanguage } from './detect.js';
import { Slots } from '../runtime/slots.js';

/** Translation outcomes counted by the node's metrics (engine/node/metrics.ts). */
export interface TranslationCounters {
  /** One per model request: ok, timeout, error, bad_answer. */
  request(outcome: RequestOutcome): void;
  /** One per sentence looked up: from the cache or sent to the model. */
  sentence(source: 'cache' | 'model'): void;
  /** One per segment decided: translated, same_language, skipped (attempts spent), dropped (too many waiting). */
  segment(outcome: SegmentOutcome, n?: number): void;
}

export type RequestOutcome = 'ok' | 'timeout' | 'error' | 'bad_answer';
export type SegmentOutcome = 'translated' | 'same_language' | 'skipped' | 'dropped';

export interface TranslatorOptions {
  /** OpenAI-compatible base URL (LLM_BASE_URL). */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly model: string;
  /** The HTTP client's own timeout, in ms: a backstop behind `requestTimeoutMs`. */
  readonly clientTimeoutMs: number;
  readonly scheduler: Scheduler;
  readonly logger: Logger;
  readonly counters: TranslationCounters;
  /** One request's time limit on the scheduler's clock, in ms. @defaultValue REQUEST_TIMEOUT_MS */
  readonly requestTimeoutMs?: number;
  /** Model requests the node has in flight at once, every session together. @defaultValue MAX_IN_FLIGHT */
  readonly maxInFlight?: number;
  /** Sentences the cache holds, least recently used dropped first. @defaultValue CACHE_SENTENCES */
  readonly cacheSentences?: number;
}

/** A live translation is worth little after this long: the speaker has moved on. */
export const REQUEST_TIMEOUT_MS = 10_000;
/**
 * Requests in flight per node. Each session has at most one (session-translation.ts); past this many the next wait
 * their turn, so a node of many multilingual sessions cannot flood the model with hundreds of parallel requests.
 */
export const MAX_IN_FLIGHT = 16;
/** ~60 characters a sentence: about 1 MiB of text at most. */
export const CACHE_SENTENCES = 10_000;

/** One sentence's answer: its translation, or null when it was already in the target language. */
export type SentenceAnswer = string | null;

export class TranslationError extends Error {
  readonly reason: Exclude<RequestOutcome, 'ok'>;
  constructor(reason: Exclude<RequestOutcome, 'ok'>) {
    super(`translation failed: ${reason}`);
    this.name = 'TranslationError';
    this.reason = reason;
  }
}

/** The answer the model must give: one item per sentence, in order. Strict mode wants every property required. */
export const TRANSLATION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['items'],
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['language', 'text'],
        properties: { language: { type: 'string', description: 'ISO 639-1 code of the source sentence' }, text: { type: 'string' } },
      },
    },
  },
} as const;

function systemPrompt(target: string): string {
  return [
    `You translate sentences of a live speech transcript into the language with code "${target}".`,
    'For each item of "sentences", in order, answer its language as an ISO 639-1 code and its translation.',
    `An item already in "${target}" is answered unchanged. Keep names and numbers; add nothing; answer in JSON only.`,
  ].join('\n');
}

export class Translator {
  readonly #o: TranslatorOptions;
  readonly #client: LazyOpenAI;
  readonly #timeoutMs: number;
  /** Model requests in flight, at most maxInFlight. */
  readonly #requests: Slots;
  readonly #cacheMax: number;
  /** `target\nsentence` → answer; a Map's order makes it an LRU (a hit moves to the end). */
  readonly #cache = new Map<string, SentenceAnswer>();

  constructor(o: TranslatorOptions) {
    this.#o = o;
    this.#timeoutMs = o.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.#requests = new Slots(o.maxInFlight ?? MAX_IN_FLIGHT);
    this.#cacheMax = o.cacheSentences ?? CACHE_SENTENCES;
    // Retries are the session's (on the scheduler, with a bound); the client's own would back off in real time.
    this.#client = new LazyOpenAI({ baseURL: o.baseUrl, apiKey: o.apiKey ?? 'unused', timeout: o.clientTimeoutMs, maxRetries: 0 });
  }

  get counters(): TranslationCounters {
    return this.#o.counters;
  }

  /** Requests waiting for a free slot, and in flight (tests, metrics). */
  get load(): { inFlight: number; waiting: number } {
    const { taken, waiting } = this.#requests.load;
    return { inFlight: taken, waiting };
  }

  /** The cached answer for `sentence` into `target`, or undefined when it was never asked. */
  cached(target: string, sentence: string): SentenceAnswer | undefined {
    const key = `${target}\n${sentence}`;
    const v = this.#cache.get(key);
    if (v === undefined) return undefined;
    this.#cache.delete(key);
    this.#cache.set(key, v);
    return v;
  }

  /**
   * Asks the model for `sentences` into `target` and caches every answer. Throws a TranslationError on a timeout,
   * a refused or failed request, or an answer that does not fit the schema; `signal` abandons the request.
   */
  async translate(sentences: readonly string[], target: string, signal: AbortSignal): Promise<SentenceAnswer[]> {
    await this.#requests.take();
    const ac = new AbortController();
    let timedOut = false;
    const timer = this.#o.scheduler.after(this.#timeoutMs, () => {
      timedOut = true;
      ac.abort();
    });
    const onAbort = (): void => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let content: string | null | undefined;
    try {
      signal.throwIfAborted();
      const client = await this.#client.client();
      const completion = await client.chat.completions.create(
        {
          model: this.#o.model,
          messages: [
            { role: 'system', content: systemPrompt(target) },
            { role: 'user', content: JSON.stringify({ target, sentences }) },
          ],
          response_format: { type: 'json_schema', json_schema: { name: 'translations', strict: true, schema: TRANSLATION_SCHEMA as unknown as Record<string, unknown> } },
          temperature: 0,
        },
        { signal: ac.signal },
      );
      content = completion.choices?.[0]?.message?.content;
    } catch (err) {
      if (signal.aborted) throw err;
      const failure = requestFailure(err);
      const reason = timedOut || failure.kind === 'timeout' ? 'timeout' : 'error';
      this.#o.counters.request(reason);
      // Static message: a provider's error body may echo the transcript.
      this.#o.logger.warn({ reason, status: failure.status }, 'translation request failed');
      throw new TranslationError(reason);
    } finally {
      this.#o.scheduler.cancel(timer);
      signal.removeEventListener('abort', onAbort);
      this.#requests.give();
    }
    const answers = readAnswers(content, sentences.length, target);
    if (!answers) {
      this.#o.counters.request('bad_answer');
      this.#o.logger.warn('translation answer did not match the schema');
      throw new TranslationError('bad_answer');
    }
    this.#o.counters.request('ok');
    sentences.forEach((s, i) => this.#remember(`${target}\n${s}`, answers[i]!));
    return answers;
  }

  #remember(key: string, answer: SentenceAnswer): void {
    this.#cache.delete(key);
    this.#cache.set(key, answer);
    if (this.#cache.size > this.#cacheMax) this.#cache.delete(this.#cache.keys().next().value!);
  }
}

/** The model's answer as one entry per sentence; undefined when it is not JSON of the schema or miscounts. */
function readAnswers(content: string | null | undefined, n: number, target: string): SentenceAnswer[] | undefined {
  let parsed: unknown;
  try {
    parsed = typeof content === 'string' ? JSON.parse(content) : undefined;
  } catch {
    return undefined;
  }
  const items = (parsed as { items?: unknown } | undefined)?.items;
  if (!Array.isArray(items) || items.length !== n) return undefined;
  const out: SentenceAnswer[] = [];
  const want = primaryLanguage(target);
  for (const item of items as { language?: unknown; text?: unknown }[]) {
    if (typeof item?.language !== 'string' || typeof item.text !== 'string' || item.text.trim() === '') return undefined;
    out.push(primaryLanguage(item.language) === want ? null : item.text.trim());
  }
  return out;
}
