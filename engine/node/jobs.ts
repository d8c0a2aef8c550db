// The jobs node: the process-conversation worker, which turns ended conversations into summaries, memories and action
// items, and at start-up re-queues the conversations a crash left in `processing`.
import type { Services } from '../services.js';
import type { SessionEvents } from '../jobs/session-events.js';
import type { KeptAudioIndex } from '../jobs/kept-audio-jobs.js';
import { announceProcessed, ProcessConversationWorker, type ProcessedListener } from '../jobs/process-conversation.js';
import { REQUEUE_SCAN_LIMIT } from '../conversations/lifecycle.js';

/** How long a node's claim to announce one conversation holds others off. */
const ANNOUNCE_CLAIM_MS = 60_000;

export interface JobsNodeOptions {
  readonly services: Services;
  readonly events: SessionEvents;
  readonly redisUrl: string;
  /** Kept audio still being transcribed holds a conversation's processing back until its last job. */
  readonly keptIndex: KeptAudioIndex;
  /** Told of every completed processing, first or reprocess (the conversation-created seam). */
  readonly onProcessed?: ProcessedListener;
}

/**
 * Starts the processing worker at JOB_CONCURRENCY jobs at once, then, in the background, re-queues conversations left
 * in `processing` and announces first completions a crash left unannounced.
 */
export function startJobsNode(o: JobsNodeOptions): ProcessConversationWorker {
  const { config, lifecycle, logger, redis } = o.services;
  const worker = new ProcessConversationWorker({
    services: o.services,
    events: o.events,
    redisUrl: o.redisUrl,
    prefix: config.redisPrefix,
    concurrency: config.jobConcurrency,
    kept: o.keptIndex,
    ...(o.onProcessed ? { onProcessed: o.onProcessed } : {}),
  });
  // In the background: a store or Redis slow to answer must not hold the node's start-up; live sessions re-queue
  // their user's stuck conversations on connect too.
  void (async () => {
    const requeued = await lifecycle.requeueStuck();
    if (requeued > 0) logger.info({ conversations: requeued }, 'conversations left in processing re-queued');
    let announced = 0;
    for (const c of await o.services.conversations.completedUnannounced(REQUEUE_SCAN_LIMIT)) {
      // One node announces each, even when several start together; a node that dies meanwhile leaves it to a later start.
      if ((await redis.set(`${config.redisPrefix}:announce-claim:${c.id}`, '1', 'PX', ANNOUNCE_CLAIM_MS, 'NX')) !== 'OK') continue;
      await announceProcessed(o.services, o.events, { conversationId: c.id, uid: c.userId, reprocess: false, discarded: c.discarded }, o.onProcessed);
      announced++;
    }
    if (announced > 0) logger.info({ conversations: announced }, 'unannounced completed conversations announced');
    logger.debug({ requeued, announced }, 'start-up scan of conversations left behind done');
  })().catch((err: unknown) => logger.error({ err: { name: (err as Error)?.name } }, 'start-up scan of conversations left behind failed'));
  return worker;
}
