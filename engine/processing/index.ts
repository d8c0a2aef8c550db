// Picks the conversation processor the configuration asks for: the LLM when LLM_BASE_URL is set, else the built-in extractor.
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { BuiltinProcessor } from './builtin.js';
import type { ConversationProcessor } from './types.js';

export type { ConversationProcessor, ProcessInput, ProcessResult } from './types.js';

/** Async because the LLM client (the `openai` package, ~13 MiB resident) is loaded only when an LLM is configured. */
export async function createProcessor(
  config: Pick<Config, 'llmBaseUrl' | 'llmApiKey' | 'llmModel' | 'llmTimeoutMs' | 'llmMaxRetries'>,
  logger: Logger,
): Promise<ConversationProcessor> {
  if (!config.llmBaseUrl) return new BuiltinProcessor();
  const { LlmProcessor } = await import('./llm.js');
  return new LlmProcessor({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    maxRetries: config.llmMaxRetries,
    logger,
  });
}
