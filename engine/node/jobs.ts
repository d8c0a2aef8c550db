// The jobs node: the process-conversation worker, which turns ended conversations into summaries, memories and action items.
import type { Services } from '../services.js';
import type { SessionEvents } from '../jobs/session-events.js';
import type { KeptAudioIndex } from '../jobs/kept-audio-jobs.js';
import { ProcessConversationWorker } from '../jobs/process-conversation.js';

export interface JobsNodeOptions {
  readonly services: Services;
  readonly events: SessionEvents;
  readonly redisUrl: string;
  /** Kept audio still being transcribed holds a conversation's processing back until its last job. */
  readonly keptIndex: KeptAudioIndex;
}

/** Starts the processing worker at JOB_CONCURRENCY jobs at once. */
export function startJobsNode(o: JobsNodeOptions): ProcessConversationWorker {
  const { config } = o.services;
  return new ProcessConversationWorker({ services: o.services, events: o.events, redisUrl: o.redisUrl, prefix: config.redisPrefix, concurrency: config.jobConcurrency, kept: o.keptIndex });
}
