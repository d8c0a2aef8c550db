// The LLM processor: one OpenAI-compatible chat completion with a strict JSON schema; anything unusable falls back to the built-in extractor.
import { LazyOpenAI, requestFailure } from '../openai-client.js';
import { Ajv } from 'ajv';
import type { Logger } from '../logger.js';
import { BuiltinProcessor, transcriptText, emptyStructured, MAX_MEMORY_CHARS, MAX_TITLE_WORDS } from './builtin.js';
import {
  CONVERSATION_CATEGORIES,
  MEMORY_CATEGORIES,
  ModelUnavailableError,
  type ConversationCategory,
  type ConversationProcessor,
  type MemoryCategory,
  type ProcessInput,
  type ProcessResult,
} from './types.js';

export interface LlmProcessorOptions {
  /** OpenAI-compatible base URL, such as `https://api.openai.com/v1`. */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer`; some local servers need none. */
  readonly apiKey: string | undefined;
  readonly model: string;
  /** Timeout of one request, in milliseconds. */
  readonly timeoutMs: number;
  /** Retries of a failed request (timeouts, 429, 5xx). */
  readonly maxRetries: number;
  readonly logger: Logger;
  /** What answers when the model cannot (its thread, for the service). @defaultValue the built-in processor inline */
  readonly fallback?: BuiltinProcessor;
}

/** The answer the model must give; strict mode wants every property required and no others. */
export const ANSWER_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['discard', 'title', 'overview', 'emoji', 'category', 'action_items', 'events', 'memories'],
  properties: {
    discard: { type: 'boolean' },
    title: { type: 'string', maxLength: 200 },
    overview: { type: 'string', maxLength: 4000 },
    emoji: { type: 'string', maxLength: 16 },
    category: { type: 'string', enum: [...CONVERSATION_CATEGORIES] },
    action_items: {
      type: 'array',
      maxItems: 50,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['description', 'due_at'],
        properties: { description: { type: 'string', minLength: 1, maxLength: 500 }, due_at: { type: ['string', 'null'], format: 'date-time' } },
      },
    },
    events: {
      type: 'array',
      maxItems: 20,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['title', 'description', 'start', 'duration'],
        properties: {
          title: { type: 'string', minLength: 1, maxLength: 200 },
          description: { type: 'string', maxLength: 2000 },
          start: { type: 'string', format: 'date-time' },
          duration: { type: 'integer', minimum: 1, maximum: 180 },
        },
      },
    },
    memories: {
      type: 'array',
      maxItems: 20,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['content', 'category'],
        properties: { content: { type: 'string', minLength: 1, maxLength: MAX_MEMORY_CHARS }, category: { type: 'string', enum: [...MEMORY_CATEGORIES] } },
      },
    },
  },
} as const;

interface Answer {
  discard: boolean;
  title: string;
  overview: string;
  emoji: string;
  category: ConversationCategory;
  action_items: { description: string; due_at: string | null }[];
  events: { title: string; description: string; start: string; duration: number }[];
  memories: { content: string; category: MemoryCategory }[];
}

// `format` is checked by hand below (strict mode servers ignore it, and ajv-formats is not needed for one format).
const ajv = new Ajv({ allErrors: false, strict: false, validateFormats: false });
const validateAnswer = ajv.compile<Answer>(ANSWER_SCHEMA);

const isIsoDate = (s: string): boolean => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(s) && !Number.isNaN(Date.parse(s));

/** Validates and normalises a parsed answer; undefined when it breaks the schema. */
export function readAnswer(value: unknown): Answer | undefined {
  if (!validateAnswer(value)) return undefined;
  if (value.action_items.some((a) => a.due_at !== null && !isIsoDate(a.due_at))) return undefined;
  if (value.events.some((e) => !isIsoDate(e.start))) return undefined;
  if (!value.discard && value.title.trim() === '') return undefined;
  return value;
}

function systemPrompt(input: ProcessInput): string {
  const kind = input.textSource === 'message' ? 'a message thread' : input.textSource === 'other_text' ? 'a text the user shared' : 'a conversation transcript';
  return [
    `You structure ${kind} recorded by a wearable for its owner (the user). Answer in JSON only, following the schema.`,
    input.allowDiscard
      ? 'Set discard to true only when the text holds nothing worth keeping (greetings, fillers, a few words of small talk); keep anything with tasks, decisions, plans, facts about the user or more than 100 words.'
      : 'Never discard: set discard to false.',
    `title: at most ${MAX_TITLE_WORDS} words, Title Case, about the main topic. overview: one to three sentences. emoji: one emoji fitting the category.`,
    `category: one of ${CONVERSATION_CATEGORIES.join(', ')}.`,
    'action_items: concrete tasks the user committed to or was asked to do, each at most 15 words, no duplicates; due_at in ISO 8601 UTC or null.',
    `events: only confirmed plans involving the user with a concrete time; start in ISO 8601 UTC resolved relative to the conversation start ${input.startedAt}; duration in minutes (30 when not said, at most 180).`,
    `memories: at most 4 timeless facts about the user ("User likes ..."), 1 to ${MAX_MEMORY_CHARS} characters, category one of ${MEMORY_CATEGORIES.join(', ')}.`,
    `Write in the language of the text (language code: ${input.language}).`,
  ].join('\n');
}

function toResult(a: Answer, input: ProcessInput): ProcessResult {
  if (a.discard && input.allowDiscard) return { discarded: true, structured: emptyStructured(), memories: [], producedBy: 'llm' };
  const iso = (s: string): string => new Date(s).toISOString();
  return {
    discarded: false,
    structured: {
      title: a.title.trim(),
      overview: a.overview.trim(),
      emoji: [...a.emoji.trim()].length > 0 ? a.emoji.trim() : '🧠',
      category: a.category,
      actionItems: a.action_items.map((x) => ({ description: x.description.trim(), dueAt: x.due_at === null ? null : iso(x.due_at) })),
      events: a.events.map((e) => ({ title: e.title.trim(), description: e.description, start: iso(e.start), duration: e.duration })),
    },
    memories: a.memories.map((m) => ({ content: m.content.trim(), category: m.category })).filter((m) => m.content.length > 0),
    producedBy: 'llm',
  };
}

export class LlmProcessor implements ConversationProcessor {
  readonly #client: LazyOpenAI;
  readonly #opts: LlmProcessorOptions;
  readonly #fallback: BuiltinProcessor;

  constructor(opts: LlmProcessorOptions) {
    this.#opts = opts;
    this.#fallback = opts.fallback ?? new BuiltinProcessor();
    this.#client = new LazyOpenAI({
      baseURL: opts.baseUrl,
      // The SDK refuses to start without a key; local OpenAI-compatible servers often need none.
      apiKey: opts.apiKey ?? 'unused',
      timeout: opts.timeoutMs,
      maxRetries: opts.maxRetries,
    });
  }

  async process(input: ProcessInput, signal?: AbortSignal): Promise<ProcessResult> {
    signal?.throwIfAborted();
    const text = transcriptText(input);
    // Nothing to send: the built-in rules decide (an empty transcript is discarded without a request).
    if (text.trim() === '') return this.#fallback.run(input);
    let content: string | null | undefined;
    try {
      const client = await this.#client.client();
      const completion = await client.chat.completions.create(
        {
          model: this.#opts.model,
          messages: [
            { role: 'system', content: systemPrompt(input) },
            { role: 'user', content: text },
          ],
          response_format: { type: 'json_schema', json_schema: { name: 'conversation_structure', strict: true, schema: ANSWER_SCHEMA as unknown as Record<string, unknown> } },
          temperature: 0,
        },
        signal ? { signal } : undefined,
      );
      content = completion.choices?.[0]?.message?.content;
    } catch (err) {
      // The caller gave up: do not answer for it.
      if (signal?.aborted) throw signal.reason ?? err;
      const { status, kind } = requestFailure(err);
      if (input.retryable) throw new ModelUnavailableError(status, kind);
      // Static message: provider bodies may echo the transcript.
      this.#opts.logger.warn({ status, kind }, 'llm request failed; using the built-in extractor');
      return this.#fallback.run(input, 'builtin-fallback');
    }
    let parsed: unknown;
    try {
      parsed = typeof content === 'string' ? JSON.parse(content) : undefined;
    } catch {
      parsed = undefined;
    }
    const answer = readAnswer(parsed);
    if (!answer) {
      this.#opts.logger.warn('llm answer did not match the schema; using the built-in extractor');
      return this.#fallback.run(input, 'builtin-fallback');
    }
    return toResult(answer, input);
  }

  async close(): Promise<void> {
    await this.#fallback.close();
  }
}
