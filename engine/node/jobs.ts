// The jobs node: the process-conversation worker, which turns ended conversations into summaries, memories and action
// items, and at start-up re-queues the conversations a crash left in `processing`.
import type { Services } from '../services.js';
import type { SessionEvents } from '../jobs/session-events.js';
import type { KeptAudioIndex } from '../jobs/kept-audio-jobs.js';
import { ProcessConversationWorker, type ProcessedListener } from '../jobs/process-conversation.js';

export interface JobsNodeOptions {
  readonly services: Services;
  readonly events: SessionEvents;
  readonly redisUrl: string;
  /** Kept audio still being transcribed holds a conversation's processing back until its last job. */
  readonly keptIndex: KeptAudioIndex;
  /** Told of every completed processing, first or reprocess (the conversation-created seam). */
  readonly onProcessed?: ProcessedListener;
  /** ProcessConversationWorkerOptions.stalledIntervalMs (tests). */
  readonly stalledIntervalMs?: number;
}

/**
 * Starts the processing worker at JOB_CONCURRENCY jobs at once, then, in the background, re-queues what a crash left
 * behind: conversations in `processing`, and completed ones whose first completion was never announced.
 */
export function startJobsNode(o: JobsNodeOptions): ProcessConversationWorker {
  const { config, lifecycle, logger } = o.services;
  const worker = new ProcessConversationWorker({
    services: o.services,
    events: o.events,
    redisUrl: o.redisUrl,
    prefix: config.redisPrefix,
    concurrency: config.jobConcurrency,
    kept: o.keptIndex,
    ...(o.onProcessed ? { onProcessed: o.onProcessed } : {}),
    ...(o.stalledIntervalMs ? { stalledIntervalMs: o.stalledIntervalMs } : {}),
  });
  // In the background: a store or Redis slow to answer must not hold the node's start-up; live sessions re-queue
  // their user's stuck conversations on connect too.
  void lifecycle.requeueStuck().then(
    ({ processing, unannounced }) => {
      if (processing + unannounced > 0) logger.info({ processing, unannounced }, 'conversations left behind by a crash re-queued');
      logger.debug('start-up scan of conversations left behind done');
    },
    (err: unknown) => logger.error({ err: { name: (err as Error)?.name } }, 'start-up scan of conversations left behind failed'),
  );
  return worker;
}
