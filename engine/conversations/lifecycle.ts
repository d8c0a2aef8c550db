// Live conversations' lifecycle: create the in_progress stub, resume it, end it (process or delete), shared by sessions, routes and jobs.
import type { ConversationsRepository, ConversationRecord, SegmentTail } from '../db/conversations.js';
import type { UsersRepository } from '../db/users.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { ConversationStatus } from '../protocol.js';
import { isoNow } from '../db/store.js';
import type { ProcessingQueue } from '../jobs/queues.js';
import { SessionEventType, type SessionEvents } from '../jobs/session-events.js';

export interface ConversationLifecycleOptions {
  conversations: ConversationsRepository;
  users: UsersRepository;
  clock: Clock;
  logger: Logger;
  queue: ProcessingQueue;
  events: SessionEvents;
  /** Whether a user created here may use the developer memory routes (MEMORY_ACCESS_DEFAULT). */
  memoryAccessDefault: boolean;
  /** Recordings a failed provider left for later transcription: a conversation waiting for them is not empty. */
  keptAudio?: { pending(conversationId: string): Promise<number> };
}

/** Most conversations one start-up scan re-queues (a crash leaves at most JOB_CONCURRENCY per node in `processing`). */
export const REQUEUE_SCAN_LIMIT = 10_000;

/** What end() did. */
export type EndOutcome = 'processing' | 'deleted' | 'gone';

/**
 * How long a live session waits, at a manual end, for the audio it already received to be decoded and answered for by
 * its speech provider before it ends the conversation anyway (the providers' own finalize waits are 5 s).
 */
export const MANUAL_END_AUDIO_WAIT_MS = 5000;
/**
 * How long POST /v1/conversations waits for every node's answer: the sessions' audio wait, their last step and the
 * end itself. A node that has not answered by then is taken to have no session of the user.
 */
export const MANUAL_END_ANSWER_MS = 8000;

export class ConversationLifecycle {
  readonly #o: ConversationLifecycleOptions;

  constructor(opts: ConversationLifecycleOptions) {
    this.#o = opts;
  }

  /** Creates the user's in_progress stub starting at epoch-ms `startedAtMs`. */
  async open(uid: string, source: string | null, language: string, startedAtMs: number): Promise<ConversationRecord> {
    const now = this.#o.clock.now();
    await this.#o.users.ensure(uid, now, this.#o.memoryAccessDefault);
    return this.#o.conversations.create({
      userId: uid,
      status: ConversationStatus.IN_PROGRESS,
      startedAt: isoNow(startedAtMs),
      finishedAt: null,
      source,
      language,
      textSource: 'audio_transcript',
      now,
    });
  }

  /**
   * The user's in_progress conversation to continue, with its last `tailSegments` segments (the live merge needs no
   * more); one idle for `timeoutS` or more is ended here instead, as the compatible system does at connect, and
   * undefined returned.
   */
  async resume(uid: string, timeoutS: number, tailSegments: number): Promise<{ conversation: ConversationRecord; tail: SegmentTail } | undefined> {
    const c = await this.#o.conversations.latestWithStatus(uid, ConversationStatus.IN_PROGRESS);
    if (!c) return undefined;
    if (this.#o.clock.now() - lastActivityMs(c) >= timeoutS * 1000) {
      await this.end(c.id, uid);
      return undefined;
    }
    return { conversation: c, tail: await this.#o.conversations.tailSegments(c.id, tailSegments) };
  }

  /** Re-enqueues the user's conversations left in `processing` (a node died mid-job); jobs are idempotent. */
  async requeueProcessing(uid: string): Promise<void> {
    for (const id of await this.#o.conversations.idsWithStatus(uid, ConversationStatus.PROCESSING)) await this.#o.queue.ensure(id, uid);
  }

  /**
   * Re-queues what a crash left behind (a jobs node runs this at start-up): every conversation in `processing`, its
   * job lost with the node or with Redis, and every completed one whose first completion was never announced (the job
   * announces it). Nodes starting together queue each once: the job id is the conversation id, and a job that finds
   * the work done does nothing. Answers how many of each were queued anew.
   */
  async requeueStuck(limit = REQUEUE_SCAN_LIMIT): Promise<{ processing: number; unannounced: number }> {
    const { conversations, queue } = this.#o;
    let processing = 0;
    let unannounced = 0;
    for (const { id, userId } of await conversations.allWithStatus(ConversationStatus.PROCESSING, limit)) {
      if ((await queue.ensure(id, userId)) === 'queued') processing++;
    }
    for (const { id, userId } of await conversations.completedUnannounced(limit)) {
      if ((await queue.ensure(id, userId)) === 'queued') unannounced++;
    }
    return { processing, unannounced };
  }

  /**
   * The owner's retry of a completed or failed conversation: back to `processing` and a job (a failed one's retry
   * waiting for its backoff runs now). `busy` while it is recording or processing; undefined when the user has no
   * such conversation. Its stored result stays until the new one replaces it.
   */
  async reprocess(uid: string, id: string): Promise<{ conversation: ConversationRecord } | { busy: ConversationStatus } | undefined> {
    const { conversations, clock, queue, events } = this.#o;
    const c = await conversations.get(uid, id);
    if (!c) return undefined;
    if (c.status !== ConversationStatus.COMPLETED && c.status !== ConversationStatus.FAILED) return { busy: c.status };
    if (!(await conversations.transition(id, c.status, ConversationStatus.PROCESSING, clock.now()))) {
      return { busy: (await conversations.getById(id))?.status ?? ConversationStatus.PROCESSING };
    }
    try {
      await queue.ensure(id, uid, { promote: true, rerunActive: true });
    } catch (err) {
      // Not queued (Redis away): put it back as it was, so the caller may simply try again.
      await conversations.transition(id, ConversationStatus.PROCESSING, c.status, clock.now()).catch(() => undefined);
      throw err;
    }
    await events.publish({ type: SessionEventType.PROCESSING_STARTED, uid, conversationId: id }).catch(() => undefined);
    this.#o.logger.info({ conversationId: id }, 'conversation queued for reprocessing');
    return { conversation: (await conversations.getById(id)) ?? c };
  }

  /** in_progress → processing and a process-conversation job; a conversation without segments or photos is deleted instead. */
  async end(conversationId: string, uid: string): Promise<EndOutcome> {
    const { conversations, clock, queue, events } = this.#o;
    // A count, not the rows: a day-long conversation has thousands of segments, and the job reads them anyway.
    const empty = !(await conversations.hasContent(conversationId));
    if (empty && !((await this.#o.keptAudio?.pending(conversationId)) ?? 0)) {
      await conversations.deleteById(conversationId);
      return 'deleted';
    }
    const now = clock.now();
    const moved = await conversations.transition(conversationId, ConversationStatus.IN_PROGRESS, ConversationStatus.PROCESSING, now, { finishedAt: isoNow(now) });
    if (!moved) {
      // Already processing: ended elsewhere. The job is enqueued either way: its id is the conversation's, so a job
      // already waiting or running is not added twice, and a processed conversation is not processed again.
      if ((await conversations.getById(conversationId))?.status !== ConversationStatus.PROCESSING) return 'gone';
      await queue.process(conversationId, uid);
      return 'processing';
    }
    try {
      await queue.process(conversationId, uid);
    } catch (err) {
      // Not queued (Redis away): back in progress, so that asking again (the user, or the session's next step) ends
      // it then. Had the job reached Redis after all, it finds the conversation in progress and leaves it.
      await conversations.transition(conversationId, ConversationStatus.PROCESSING, ConversationStatus.IN_PROGRESS, clock.now()).catch(() => undefined);
      throw err;
    }
    await events.publish({ type: SessionEventType.PROCESSING_STARTED, uid, conversationId }).catch(() => undefined);
    this.#o.logger.debug({ conversationId }, 'conversation handed to processing');
    return 'processing';
  }

  /**
   * Manual end of recording (POST /v1/conversations). Every node's live sessions of the user end the conversation
   * they record into, once the audio they had received is transcribed into it (bounded: MANUAL_END_AUDIO_WAIT_MS);
   * when none had one (no live session, only one whose client left, or none answering in MANUAL_END_ANSWER_MS), the
   * user's in_progress conversation is ended from the store. The conversation ended, the latest when sessions on
   * several devices ended one each; undefined when there was none.
   */
  async endRecording(uid: string): Promise<{ conversation: ConversationRecord; outcome: EndOutcome } | undefined> {
    const answers = await this.#o.events.requestEnd(uid, MANUAL_END_ANSWER_MS);
    const ended = answers.flatMap((a) => a.ended);
    if (ended.length === 0) return this.endCurrent(uid);
    // Sessions on several devices may each have ended one: the latest that went to processing is the answer.
    let best: ConversationRecord | undefined;
    for (const e of ended) {
      if (e.outcome === 'deleted') continue;
      const c = await this.#o.conversations.getById(e.conversationId);
      if (c && c.status !== ConversationStatus.IN_PROGRESS && (!best || c.startedAt > best.startedAt)) best = c;
    }
    return best ? { conversation: best, outcome: 'processing' } : undefined;
  }

  /** Ends the user's current in_progress conversation from the store alone; undefined when there is none. */
  async endCurrent(uid: string): Promise<{ conversation: ConversationRecord; outcome: EndOutcome } | undefined> {
    const c = await this.#o.conversations.latestWithStatus(uid, ConversationStatus.IN_PROGRESS);
    if (!c) return undefined;
    const outcome = await this.end(c.id, uid);
    return { conversation: (await this.#o.conversations.getById(c.id)) ?? c, outcome };
  }

  /** After a session left `conversationId` in progress: end it later unless someone resumes it and speaks. */
  async leftInProgress(conversationId: string, uid: string, timeoutS: number): Promise<void> {
    await this.#o.queue.idleCheck(conversationId, uid, timeoutS * 1000);
  }
}

/** When the conversation last changed: a segment append moves updated_at. */
export function lastActivityMs(c: ConversationRecord): number {
  return Date.parse(c.finishedAt ?? c.updatedAt ?? c.startedAt);
}
