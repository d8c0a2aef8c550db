// Picks the conversation processor the configuration asks for: the LLM when LLM_BASE_URL is set, else the built-in extractor.
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { BuiltinProcessor, THREAD_FROM_CHARS } from './builtin.js';
import type { ConversationProcessor } from './types.js';

export type { ConversationProcessor, ProcessInput, ProcessResult } from './types.js';

/**
 * Async because the LLM client (the `openai` package, heavy when resident) is loaded only when an LLM is configured.
 * `thread`: the built-in extractor (the processor, or the LLM's fallback) runs long transcripts on a thread of its
 * own (the service asks for it; close() the processor to end the thread).
 */
export async function createProcessor(
  config: Pick<Config, 'llmBaseUrl' | 'llmApiKey' | 'llmModel' | 'llmTimeoutMs' | 'llmMaxRetries'>,
  logger: Logger,
  opts: { thread?: boolean } = {},
): Promise<ConversationProcessor> {
  const builtin = new BuiltinProcessor(opts.thread ? { threadFromChars: THREAD_FROM_CHARS } : {});
  if (!config.llmBaseUrl) return builtin;
  const { LlmProcessor } = await import('./llm.js');
  return new LlmProcessor({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    maxRetries: config.llmMaxRetries,
    logger,
    fallback: builtin,
  });
}
