// The BullMQ producer side: queue and job names, payload shapes, and the processing queue live sessions and routes enqueue to.
import { Queue, type Worker } from 'bullmq';
import { createRedis, isClusterUrl, type RedisClient } from '../redis.js';

export const QueueName = { PROCESSING: 'processing' } as const;
export const JobName = { PROCESS_CONVERSATION: 'process-conversation' } as const;

/** Payload of process-conversation: ids only, never transcripts. */
export interface ProcessConversationData {
  conversationId: string;
  uid: string;
  /**
   * Set on the idle check queued when a session ends with its conversation still `in_progress`: the job ends the
   * conversation only if no segment arrived for this many milliseconds, else does nothing.
   */
  idleMs?: number;
}

export interface ProcessingQueueOptions {
  redisUrl: string;
  /** BullMQ key prefix (the config's REDIS_PREFIX). */
  prefix: string;
}

/**
 * A BullMQ connection. Workers need `maxRetriesPerRequest: null` (their blocking reads wait forever); producers use a
 * small retry budget, so enqueueing fails fast while Redis is away instead of hanging a session or a shutdown. A worker
 * gets its own client: BullMQ duplicates it for the blocking reads.
 */
export function bullConnection(url: string, role: 'worker' | 'producer', closing: () => boolean = () => false): RedisClient {
  const r = createRedis(url, {
    maxRetriesPerRequest: role === 'worker' ? null : 2,
    // A worker's blocking reads wait longer than any command timeout, by design.
    ...(role === 'worker' ? { commandTimeout: undefined } : {}),
    enableAutoPipelining: false,
    // Once closing, stop reconnecting: BullMQ duplicates this connection (blocking reads), and a duplicate left
    // reconnecting to a lost Redis would keep the process alive.
    retryStrategy: (times) => (closing() ? null : Math.min(times * 200, 2000)),
  });
  r.on('error', () => undefined);
  return r;
}

/**
 * BullMQ's key prefix. On a Redis Cluster it is a hash tag (`{svc}`): every key of a queue then lives in one slot, as
 * BullMQ's scripts, which touch several of them at once, require. One server keeps the plain prefix and its queues.
 */
export function bullPrefix(redisUrl: string, prefix: string): string {
  return isClusterUrl(redisUrl) ? `{${prefix}}` : prefix;
}

/**
 * Waits for `p` to settle, but at most `ms` milliseconds (a lost Redis must not hold shutdown hostage; `p` is then left
 * to settle on its own). True when it settled in time.
 */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([p.then(() => true, () => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  clearTimeout(timer);
  return settled;
}

/** Lets a worker's running jobs finish (bounded), then drops its connections even when Redis is gone. */
export async function closeWorker(worker: Worker, connection: RedisClient, timeoutMs: number): Promise<void> {
  // With Redis gone no job can finish anyway: close at once (BullMQ re-runs stalled jobs elsewhere).
  await within(worker.close(connection.status !== 'ready'), timeoutMs);
  await within(worker.disconnect(), 500);
  await within(connection.quit(), 500);
  connection.disconnect();
}

/**
 * Waits before each automatic retry of a failed process-conversation job: 30 s, 2 min, 10 min, 30 min (about 42 min
 * in all, enough to ride out a language model's short outage), each lengthened by up to 10% so that conversations
 * failed together by one outage do not all come back at once.
 */
export const PROCESS_RETRY_DELAYS_MS = [30_000, 120_000, 600_000, 1_800_000] as const;
export const PROCESS_RETRY_JITTER = 0.1;

/** The wait before retry `attemptsMade` (1 after the first failure); BullMQ's backoff strategy of the processing worker. */
export function processRetryDelayMs(attemptsMade: number, random: () => number = Math.random): number {
  const base = PROCESS_RETRY_DELAYS_MS[Math.min(Math.max(attemptsMade, 1), PROCESS_RETRY_DELAYS_MS.length) - 1]!;
  return Math.round(base * (1 + PROCESS_RETRY_JITTER * random()));
}

/**
 * BullMQ options of a process-conversation job (its id, the conversation id, is set per job): a first attempt and one
 * per PROCESS_RETRY_DELAYS_MS; done jobs removed, the last 1,000 failed ones kept.
 */
export const PROCESS_JOB_OPTIONS = {
  attempts: PROCESS_RETRY_DELAYS_MS.length + 1,
  backoff: { type: 'process-retry' },
  removeOnComplete: true,
  removeOnFail: 1000,
} as const;

/** What ProcessingQueue.ensure() found or did. */
export type EnsureOutcome = 'queued' | 'present' | 'promoted';

export class ProcessingQueue {
  readonly #connection: RedisClient;
  readonly queue: Queue<ProcessConversationData>;

  constructor(opts: ProcessingQueueOptions) {
    this.#connection = bullConnection(opts.redisUrl, 'producer');
    this.queue = new Queue<ProcessConversationData>(QueueName.PROCESSING, { connection: this.#connection, prefix: bullPrefix(opts.redisUrl, opts.prefix) });
    this.queue.on('error', () => undefined);
  }

  /** Enqueues processing; the job id is the conversation id, so enqueueing twice runs it once. */
  async process(conversationId: string, uid: string): Promise<void> {
    await this.queue.add(JobName.PROCESS_CONVERSATION, { conversationId, uid }, { ...PROCESS_JOB_OPTIONS, jobId: conversationId });
  }

  /**
   * Makes sure a job will process the conversation: nothing is added while one waits, runs or waits for its retry
   * (with `promote`, a retry waiting for its backoff runs now); a finished job's record under the same id (a final
   * failure is kept for inspection) is replaced by a new job. Safe from several nodes at once: the job id is the
   * conversation id, so only one job is ever queued. With `rerunActive` (an owner's reprocess of a completed or
   * failed conversation), a job still running gets a follow-up.
   */
  async ensure(conversationId: string, uid: string, opts: { promote?: boolean; rerunActive?: boolean } = {}): Promise<EnsureOutcome> {
    const job = await this.queue.getJob(conversationId);
    if (job) {
      const state = await job.getState();
      if (state === 'active' && opts.rerunActive) {
        // An owner's reprocess while the last run finishes its tail (result stored, webhooks being announced): that
        // run will not look at the conversation again, so a follow-up job does the new run.
        await this.queue.add(JobName.PROCESS_CONVERSATION, { conversationId, uid }, { ...PROCESS_JOB_OPTIONS, jobId: `${conversationId}-rerun-${Date.now()}` });
        return 'queued';
      }
      if (state === 'delayed' && opts.promote) {
        await job.promote().catch(() => undefined); // promoted meanwhile by another caller, or it started
        return 'promoted';
      }
      if (state !== 'completed' && state !== 'failed' && state !== 'unknown') return 'present';
      // Removing a job that another node just removed or restarted is harmless: the add below is deduplicated.
      await job.remove().catch(() => undefined);
    }
    await this.process(conversationId, uid);
    return 'queued';
  }

  /** Ends the conversation after `delayMs` unless a segment arrived meanwhile (a session left it `in_progress`). */
  async idleCheck(conversationId: string, uid: string, delayMs: number): Promise<void> {
    await this.queue.add(JobName.PROCESS_CONVERSATION, { conversationId, uid, idleMs: delayMs }, {
      jobId: `${conversationId}-idle-${Date.now()}`,
      delay: delayMs,
      removeOnComplete: true,
      removeOnFail: 100,
    });
  }

  async close(): Promise<void> {
    await within(this.queue.close(), 1000);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}
