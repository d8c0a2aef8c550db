// The conversation processor's contract: transcript in; discard decision, structured summary and memories out.
// Used synchronously by the developer create routes, and by the process-conversation job for live sessions.

/** The public API's conversation category enumeration, exact. */
export const CONVERSATION_CATEGORIES = [
  'personal', 'education', 'health', 'finance', 'legal', 'philosophy', 'spiritual', 'science', 'entrepreneurship',
  'parenting', 'romantic', 'travel', 'inspiration', 'technology', 'business', 'social', 'work', 'sports', 'politics',
  'literature', 'history', 'architecture', 'music', 'weather', 'news', 'entertainment', 'psychology', 'real', 'design',
  'family', 'economics', 'environment', 'other',
] as const;
export type ConversationCategory = (typeof CONVERSATION_CATEGORIES)[number];

/** The public API's memory category enumeration, exact. */
export const MEMORY_CATEGORIES = ['core', 'hobbies', 'lifestyle', 'interests', 'habits', 'work', 'skills', 'learnings', 'other', 'system'] as const;
export type MemoryCategory = (typeof MEMORY_CATEGORIES)[number];

/** Where an uploaded text came from (the create-from-text `text_source`): a transcript, a message thread, or other text. */
export type TextSource = 'audio_transcript' | 'message' | 'other_text';

export interface TranscriptSegmentInput {
  text: string;
  /** Label such as SPEAKER_00. */
  speaker?: string;
  speakerId?: number | null;
  isUser?: boolean;
  /** Seconds from conversation start. */
  start: number;
  end: number;
}

export interface ProcessInput {
  /** The transcript, or the one pseudo-segment holding an external text. */
  segments: TranscriptSegmentInput[];
  textSource: TextSource;
  /** BCP-47-ish code such as `en`; `multi` when unknown. */
  language: string;
  /** ISO 8601 UTC; event times are resolved relative to this. */
  startedAt: string;
  finishedAt: string;
  /** Whether the processor may decide to discard (external texts are never discarded). */
  allowDiscard: boolean;
  /**
   * The caller can run again later (a queued job, which retries and which its owner can reprocess): when the language
   * model cannot be reached (no connection, timeout, an error status), throw ModelUnavailableError instead of falling
   * back to the built-in extractor, so the conversation gets the model's structure on a later attempt.
   */
  retryable?: boolean;
}

/** The language model did not answer (ProcessInput.retryable); carries no provider text. */
export class ModelUnavailableError extends Error {
  constructor(
    readonly status: number | undefined,
    readonly kind: 'timeout' | 'connection' | 'api',
  ) {
    super(`language model unavailable (${kind}${status ? ` ${status}` : ''})`);
    this.name = 'ModelUnavailableError';
  }
}

export interface ExtractedActionItem {
  description: string;
  /** ISO 8601 UTC, or null when no due time was said. */
  dueAt: string | null;
}

export interface ExtractedEvent {
  title: string;
  description: string;
  /** ISO 8601 UTC. */
  start: string;
  /** Minutes; 30 when not said. */
  duration: number;
}

export interface Structured {
  title: string;
  overview: string;
  /** One emoji. */
  emoji: string;
  category: ConversationCategory;
  actionItems: ExtractedActionItem[];
  events: ExtractedEvent[];
}

export interface ExtractedMemory {
  /** 1–500 characters. */
  content: string;
  category: MemoryCategory;
}

export interface ProcessResult {
  discarded: boolean;
  /** Empty title/overview, emoji 🧠 and no items when discarded. */
  structured: Structured;
  memories: ExtractedMemory[];
  /** Which implementation produced the result: `builtin`, `llm`, or `builtin-fallback` when the LLM answer was unusable. */
  producedBy: 'builtin' | 'llm' | 'builtin-fallback';
}

export interface ConversationProcessor {
  process(input: ProcessInput, signal?: AbortSignal): Promise<ProcessResult>;
  /** Frees what the processor holds (a thread); the service calls it once no job or request can use it. */
  close?(): Promise<void>;
}

/** One transcript for the built-in processor's thread (engine/processing/worker.ts). */
export interface BuiltinTask {
  input: ProcessInput;
  producedBy: ProcessResult['producedBy'];
}
