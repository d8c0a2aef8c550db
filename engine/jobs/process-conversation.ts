// The process-conversation job: transcript → processor → stored structure, memories and action items → completed (or failed).
import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Services } from '../services.js';
import { afterProcessed } from '../conversations/derived.js';
import { ConversationStatus } from '../protocol.js';
import { lastActivityMs } from '../conversations/lifecycle.js';
import { bullConnection, QueueName, within, type ProcessConversationData } from './queues.js';
import { SessionEventType, type SessionEvents } from './session-events.js';

/** What one run did (tests and logs). */
export type ProcessOutcome = 'completed' | 'deleted' | 'skipped' | 'deferred';

/**
 * Runs the job for one conversation. Idempotent: a completed conversation is left alone, a second run of a failed
 * one re-enters `processing`. Throws after marking the conversation `failed`, so BullMQ retries it.
 */
export async function processConversation(s: Services, events: SessionEvents, data: ProcessConversationData, signal?: AbortSignal, kept?: { pending(conversationId: string): Promise<number> }): Promise<ProcessOutcome> {
  const { conversationId, uid } = data;
  const c = await s.conversations.getById(conversationId);
  if (!c || c.status === ConversationStatus.COMPLETED) return 'skipped';
  if (c.status === ConversationStatus.IN_PROGRESS) {
    // Only the idle check finds it still in progress: end it if nobody spoke into it since.
    if (data.idleMs === undefined || s.clock.now() - lastActivityMs(c) < data.idleMs) return 'skipped';
    const outcome = await s.lifecycle.end(conversationId, uid);
    return outcome === 'deleted' ? 'deleted' : 'skipped'; // 'processing' enqueued the real job
  }
  if (data.idleMs !== undefined) return 'skipped';
  // Audio a failed provider left unanswered is still being transcribed: its last job enqueues processing again.
  if (kept && (await kept.pending(conversationId)) > 0) return 'deferred';
  if (c.status === ConversationStatus.FAILED) await s.conversations.setStatus(conversationId, ConversationStatus.PROCESSING, s.clock.now());
  const segments = await s.conversations.segments(conversationId);
  if (segments.length === 0 && (await s.conversations.photoCount(conversationId)) === 0) {
    await s.conversations.deleteById(conversationId);
    return 'deleted';
  }
  try {
    const result = await s.processor.process(
      {
        segments: segments.map((x) => ({ text: x.text, start: x.start, end: x.end, speaker: x.speaker, speakerId: x.speakerId, isUser: x.isUser })),
        textSource: 'audio_transcript',
        language: c.language ?? 'en',
        startedAt: c.startedAt,
        finishedAt: c.finishedAt ?? new Date(s.clock.now()).toISOString(),
        allowDiscard: true,
      },
      signal,
    );
    await s.conversations.saveResult(conversationId, result, s.clock.now());
    await afterProcessed(s, c.userId, conversationId, result);
  } catch (err) {
    await s.conversations.setStatus(conversationId, ConversationStatus.FAILED, s.clock.now());
    s.logger.error({ conversationId, err: { name: (err as Error)?.name } }, 'conversation processing failed');
    throw err;
  }
  await events.publish({ type: SessionEventType.CREATED, uid: c.userId, conversationId }).catch(() => undefined);
  return 'completed';
}

export interface ProcessConversationWorkerOptions {
  services: Services;
  events: SessionEvents;
  redisUrl: string;
  /** BullMQ key prefix (REDIS_PREFIX). */
  prefix: string;
  /** Jobs run at once on this node (JOB_CONCURRENCY). @defaultValue 16 */
  concurrency?: number;
  /** Conversations still waiting for kept audio (any node): their processing is deferred until it is transcribed. */
  kept?: { pending(conversationId: string): Promise<number> };
}

/** The BullMQ consumer of the `processing` queue; started by Service when ROLE is all or jobs. */
export class ProcessConversationWorker {
  readonly #connection: Redis;
  #closing = false;
  readonly worker: Worker<ProcessConversationData, ProcessOutcome>;

  constructor(opts: ProcessConversationWorkerOptions) {
    this.#connection = bullConnection(opts.redisUrl, 'worker', () => this.#closing);
    this.worker = new Worker<ProcessConversationData, ProcessOutcome>(
      QueueName.PROCESSING,
      (job: Job<ProcessConversationData>, _token?: string, signal?: AbortSignal) => processConversation(opts.services, opts.events, job.data, signal, opts.kept),
      { connection: this.#connection, prefix: opts.prefix, concurrency: opts.concurrency ?? 16 },
    );
    this.worker.on('error', () => undefined);
  }

  /** Lets running jobs finish (bounded), then drops the connections even when Redis is gone. */
  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    // With Redis gone no job can finish anyway: close at once (BullMQ re-runs stalled jobs elsewhere).
    await within(this.worker.close(this.#connection.status !== 'ready'), timeoutMs);
    await within(this.worker.disconnect(), 500);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}
