// The process-conversation job: transcript → processor → stored structure, memories and action items → completed (or failed).
import { Worker, type Job } from 'bullmq';
import type { RedisClient } from '../redis.js';
import type { Services } from '../services.js';
import { afterProcessed } from '../conversations/derived.js';
import { ConversationStatus } from '../protocol.js';
import { lastActivityMs } from '../conversations/lifecycle.js';
import { bullConnection, bullPrefix, closeWorker, processRetryDelayMs, QueueName, type ProcessConversationData } from './queues.js';
import { SessionEventType, type SessionEvents } from './session-events.js';

/** What one run did (tests and logs). */
export type ProcessOutcome = 'completed' | 'announced' | 'deleted' | 'skipped' | 'deferred';

/**
 * A conversation finished processing: the seam for what fires on it (conversation-created webhooks). `reprocess` is
 * false exactly once per conversation, at its first completion; a later completion (its owner's reprocess) says true,
 * so that what must fire once (app webhooks) does not fire again.
 */
export interface ConversationProcessed {
  conversationId: string;
  uid: string;
  reprocess: boolean;
  discarded: boolean;
}

/**
 * Called once the result is stored, before the job is done. A failure is logged, does not fail the job, and leaves the
 * completion unrecorded, so that the next process job of the conversation announces it again.
 */
export type ProcessedListener = (event: ConversationProcessed) => Promise<void> | void;

export interface ProcessRunOptions {
  signal?: AbortSignal;
  /** Conversations still waiting for kept audio (any node). */
  kept?: { pending(conversationId: string): Promise<number> };
  /** Whether this is the job's last attempt: its failure leaves the conversation `failed` until its owner reprocesses it. */
  lastAttempt?: boolean;
  onProcessed?: ProcessedListener;
}

/**
 * Runs the job for one conversation. Idempotent: a completed conversation is left alone once its first completion is
 * recorded as announced (an owner's reprocess moves it back to `processing` first), a failed one re-enters
 * `processing`. Throws after marking the conversation `failed`, so BullMQ retries it; nothing of it is lost (its
 * transcript and any earlier result stay).
 */
export async function processConversation(s: Services, events: SessionEvents, data: ProcessConversationData, o: ProcessRunOptions = {}): Promise<ProcessOutcome> {
  const { conversationId, uid } = data;
  const c = await s.conversations.getById(conversationId);
  if (!c) return 'skipped';
  if (c.status === ConversationStatus.COMPLETED) {
    if (c.firstProcessedAt !== null) return 'skipped';
    // Completed but never recorded as announced: a run that died (or whose listener failed) between the two.
    await announceProcessed(s, events, { conversationId, uid: c.userId, reprocess: false, discarded: c.discarded }, o.onProcessed);
    return 'announced';
  }
  if (c.status === ConversationStatus.IN_PROGRESS) {
    // Only the idle check finds it still in progress: end it if nobody spoke into it since.
    if (data.idleMs === undefined || s.clock.now() - lastActivityMs(c) < data.idleMs) return 'skipped';
    const outcome = await s.lifecycle.end(conversationId, uid);
    return outcome === 'deleted' ? 'deleted' : 'skipped'; // 'processing' enqueued the real job
  }
  if (data.idleMs !== undefined) return 'skipped';
  // Audio a failed provider left unanswered is still being transcribed: its last job enqueues processing again.
  if (o.kept && (await o.kept.pending(conversationId)) > 0) return 'deferred';
  if (c.status === ConversationStatus.FAILED) await s.conversations.setStatus(conversationId, ConversationStatus.PROCESSING, s.clock.now());
  const segments = await s.conversations.segments(conversationId);
  if (segments.length === 0 && (await s.conversations.photoCount(conversationId)) === 0) {
    await s.conversations.deleteById(conversationId);
    return 'deleted';
  }
  // A conversation whose first completion was announced before is being reprocessed by its owner.
  const reprocess = c.firstProcessedAt !== null;
  let discarded: boolean;
  try {
    const result = await s.processor.process(
      {
        segments: segments.map((x) => ({ text: x.text, start: x.start, end: x.end, speaker: x.speaker, speakerId: x.speakerId, isUser: x.isUser })),
        textSource: 'audio_transcript',
        language: c.language ?? 'en',
        startedAt: c.startedAt,
        finishedAt: c.finishedAt ?? new Date(s.clock.now()).toISOString(),
        allowDiscard: true,
        // A model outage fails the attempt rather than settling for the built-in structure: the job retries, and after
        // the last attempt the conversation stays visibly `failed` for its owner to reprocess.
        retryable: true,
      },
      o.signal,
    );
    // Deleted while it was processed: its memories, action items and webhooks must not outlive it.
    if (!(await s.conversations.saveResult(conversationId, result, s.clock.now()))) return 'deleted';
    discarded = result.discarded;
    await afterProcessed(s, c.userId, conversationId, result);
  } catch (err) {
    await s.conversations.setStatus(conversationId, ConversationStatus.FAILED, s.clock.now());
    const name = (err as Error)?.name;
    if (o.lastAttempt) s.logger.error({ conversationId, err: { name } }, 'conversation processing failed after its last attempt');
    else s.logger.warn({ conversationId, err: { name } }, 'conversation processing failed; retried later');
    throw err;
  }
  await announceProcessed(s, events, { conversationId, uid: c.userId, reprocess, discarded }, o.onProcessed);
  return 'completed';
}

/**
 * Tells the listener and the user's live sessions (memory_created) that a conversation completed; a first completion
 * is then recorded (first_processed_at). A crash before that record leaves the conversation to the next process job
 * of it (BullMQ's stalled-job check, a jobs node's start-up scan), which announces it again: at least once, so a
 * listener dedupes by conversation id. A listener that throws, or an announcement Redis did not take, is logged and
 * left to that next job likewise.
 */
export async function announceProcessed(s: Pick<Services, 'conversations' | 'clock' | 'logger'>, events: Pick<SessionEvents, 'publish'>, e: ConversationProcessed, onProcessed?: ProcessedListener): Promise<void> {
  let heard = true;
  try {
    await onProcessed?.(e);
  } catch (err) {
    heard = false;
    s.logger.error({ conversationId: e.conversationId, err: { name: (err as Error)?.name } }, 'conversation processed listener failed');
  }
  // Published before the record: a crash between the two announces it again, never not at all.
  const published = await events.publish({ type: SessionEventType.CREATED, uid: e.uid, conversationId: e.conversationId, reprocess: e.reprocess }).then(
    () => true,
    () => {
      s.logger.warn({ conversationId: e.conversationId }, 'conversation completion not published; left to a later run of its job');
      return false;
    },
  );
  if (heard && published && !e.reprocess) await s.conversations.markFirstProcessed(e.conversationId, s.clock.now());
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
  /** Told of every completed processing (ConversationProcessed). */
  onProcessed?: ProcessedListener;
  /** How often jobs whose process died are looked for, and how long a job's lock lasts. @defaultValue BullMQ's 30 s */
  stalledIntervalMs?: number;
}

/** The BullMQ consumer of the `processing` queue; started by Service when ROLE is all or jobs. */
export class ProcessConversationWorker {
  readonly #connection: RedisClient;
  #closing = false;
  readonly worker: Worker<ProcessConversationData, ProcessOutcome>;

  constructor(opts: ProcessConversationWorkerOptions) {
    this.#connection = bullConnection(opts.redisUrl, 'worker', () => this.#closing);
    this.worker = new Worker<ProcessConversationData, ProcessOutcome>(
      QueueName.PROCESSING,
      (job: Job<ProcessConversationData>, _token?: string, signal?: AbortSignal) =>
        processConversation(opts.services, opts.events, job.data, {
          ...(signal ? { signal } : {}),
          ...(opts.kept ? { kept: opts.kept } : {}),
          ...(opts.onProcessed ? { onProcessed: opts.onProcessed } : {}),
          lastAttempt: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
        }),
      {
        connection: this.#connection,
        prefix: bullPrefix(opts.redisUrl, opts.prefix),
        concurrency: opts.concurrency ?? 16,
        settings: { backoffStrategy: (attemptsMade: number) => processRetryDelayMs(attemptsMade) },
        ...(opts.stalledIntervalMs ? { stalledInterval: opts.stalledIntervalMs, lockDuration: opts.stalledIntervalMs } : {}),
      },
    );
    this.worker.on('error', () => undefined);
  }

  /** Lets running jobs finish (bounded), then drops the connections even when Redis is gone. */
  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await closeWorker(this.worker, this.#connection, timeoutMs);
  }
}
