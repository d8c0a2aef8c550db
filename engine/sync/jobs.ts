// The sync-local-files job: each file of a batch decoded, transcribed through the engine list (as kept audio is) and
// placed into the user's conversations by wall-clock time; then every conversation it touched is processed. Progress
// is stored per file, so a job cut short by a restart goes on where it stopped (BullMQ re-runs it).
import { Queue, Worker, type Job } from 'bullmq';
import type { RedisClient } from '../redis.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import type { ConversationsRepository } from '../db/conversations.js';
import { SyncFileStatus, SyncJobStatus, type SyncFile, type SyncRepository } from '../db/sync-jobs.js';
import type { ConversationLifecycle } from '../conversations/lifecycle.js';
import type { ProcessingQueue } from '../jobs/queues.js';
import { bullConnection, bullPrefix, closeWorker, within } from '../jobs/queues.js';
import { transcribePcm } from '../jobs/transcribe-kept.js';
import type { EngineList } from '../stt/engine-list.js';
import { ConversationStatus } from '../protocol.js';
import { AudioInputError } from '../voice/audio.js';
import { parseSyncFile } from './files.js';
import { placeSegments } from './place.js';
import type { UploadStore } from './uploads.js';

export const SYNC_QUEUE = 'sync-local-files';
/** Attempts of a batch while no engine can transcribe (about 20 minutes of backoff in all). */
const SYNC_ATTEMPTS = 8;
const SYNC_BACKOFF_MS = 10_000;
/** Batches one jobs node runs at once: each streams one file at a time to a provider. */
export const SYNC_CONCURRENCY = 4;

/** Why the files still pending fail when the last attempt gives up: no engine took the audio… */
export const NO_ENGINE = 'no speech engine could transcribe the file';
/** …or the node's audio decoder could not run (not the file's fault: sending it again may work). */
export const NO_DECODER = 'the server could not decode the file; send it again later';

export interface SyncJobData {
  jobId: string;
  uid: string;
}

export interface SyncDeps {
  sync: SyncRepository;
  uploads: UploadStore;
  conversations: ConversationsRepository;
  lifecycle: ConversationLifecycle;
  queue: ProcessingQueue;
  stt: EngineList;
  scheduler: Scheduler;
  logger: Logger;
  now: () => number;
  /** Makes sure the user's row exists (a device may sync before it ever streamed). */
  ensureUser: (uid: string) => Promise<void>;
  /** The user's transcription language (their setting), else `en`. */
  language: (uid: string) => Promise<string>;
  /** Decodes a file off the main thread (FileDecoder.sync), which may take its bytes; without it, on the calling thread. */
  decode?: (bytes: Uint8Array, filename: string, nowMs: number) => Promise<Int16Array>;
  metrics?: SyncJobMetrics;
}

/** What a finished batch reports (engine/node/metrics.ts counts it). */
export interface SyncJobMetrics {
  batch(outcome: 'completed' | 'failed'): void;
  file(status: string): void;
  audioSeconds(s: number): void;
}

export type SyncOutcome = 'completed' | 'failed' | 'gone';

/** Marks a file failed with a public-safe reason and gives its hash back, so the same file may be sent again. */
async function fail(d: SyncDeps, uid: string, f: SyncFile, reason: string): Promise<void> {
  f.status = SyncFileStatus.FAILED;
  f.error = reason;
  await d.sync.release(uid, f.sha256);
  await d.uploads.remove(f.uploadId);
}

/** Runs one batch; throws to be retried (no engine usable) unless `lastAttempt`, which fails its pending files. */
export async function runSync(d: SyncDeps, data: SyncJobData, signal: AbortSignal, lastAttempt: boolean): Promise<SyncOutcome> {
  const job = await d.sync.get(data.jobId);
  if (!job) return 'gone';
  if (job.status === SyncJobStatus.COMPLETED || job.status === SyncJobStatus.FAILED) return job.status;
  const { files } = job;
  d.logger.debug({ syncJobId: job.id, files: files.length }, 'sync job started');
  await d.sync.save(job.id, SyncJobStatus.RUNNING, files, d.now());
  await d.ensureUser(job.userId);
  const language = await d.language(job.userId);
  const touched = new Set(files.flatMap((f) => f.conversationIds));
  let failure: unknown;
  /** What a file still pending is failed with when the last attempt gives up: what stopped the job. */
  let failedWith = NO_ENGINE;
  // In wall-clock order, so that a recording split over files builds one conversation forwards.
  for (const f of [...files].sort((a, b) => a.startedAtMs - b.startedAtMs)) {
    if (f.status !== SyncFileStatus.PENDING) continue;
    let pcm: Int16Array;
    try {
      const bytes = await d.uploads.read(f.uploadId).catch(() => {
        throw new AudioInputError('the uploaded file is gone');
      });
      pcm = d.decode ? await d.decode(bytes, f.filename, d.now()) : parseSyncFile(bytes, f.filename, d.now()).decode();
    } catch (err) {
      // The decoder's own failure (its thread died, the node is stopping) is not the file's: the job runs again.
      if (!(err instanceof AudioInputError)) {
        failure = err;
        failedWith = NO_DECODER;
        break;
      }
      await fail(d, job.userId, f, err.reason);
      await d.sync.save(job.id, SyncJobStatus.RUNNING, files, d.now());
      continue;
    }
    let result;
    try {
      result = await transcribePcm(d, pcm, language, `sync-${job.id}`, signal);
    } catch (err) {
      failure = err;
      break;
    }
    const placed = await placeSegments(d, job.userId, language, f.startedAtMs, result.segments, result.provider);
    f.status = SyncFileStatus.DONE;
    f.segments = placed.segments;
    f.skipped = placed.skipped;
    f.conversationIds = placed.conversationIds;
    for (const id of placed.conversationIds) touched.add(id);
    await d.sync.save(job.id, SyncJobStatus.RUNNING, files, d.now());
    await d.uploads.remove(f.uploadId);
    d.metrics?.audioSeconds(pcm.length / 16000);
    d.logger.info({ syncJobId: job.id, segments: placed.segments, skipped: placed.skipped, conversations: placed.conversationIds.length, audioS: Math.round(pcm.length / 16) / 1000 }, 'synced file placed');
  }
  if (failure !== undefined && !lastAttempt) throw failure;
  if (failure !== undefined) {
    for (const f of files) if (f.status === SyncFileStatus.PENDING) await fail(d, job.userId, f, failedWith);
  }
  for (const id of touched) await processTouched(d, job.userId, id);
  const status = files.some((f) => f.status === SyncFileStatus.DONE || f.status === SyncFileStatus.DUPLICATE) || files.length === 0 ? SyncJobStatus.COMPLETED : SyncJobStatus.FAILED;
  await d.sync.save(job.id, status, files, d.now());
  d.metrics?.batch(status);
  for (const f of files) d.metrics?.file(f.status);
  return status;
}

/** A conversation the batch added to is processed like an ended live one; one already processed is processed again. */
async function processTouched(d: SyncDeps, uid: string, id: string): Promise<void> {
  const c = await d.conversations.getById(id);
  if (!c) return;
  if (c.status === ConversationStatus.PROCESSING) await d.queue.ensure(id, uid);
  else if (c.status === ConversationStatus.COMPLETED || c.status === ConversationStatus.FAILED) await d.lifecycle.reprocess(uid, id);
  // in_progress: a live session is still recording into it and ends it itself.
}

/** The producer side: every node that takes POST /v2/sync-local-files enqueues here. */
export class SyncQueue {
  readonly #connection: RedisClient;
  readonly queue: Queue<SyncJobData>;

  constructor(o: { redisUrl: string; prefix: string }) {
    this.#connection = bullConnection(o.redisUrl, 'producer');
    this.queue = new Queue<SyncJobData>(SYNC_QUEUE, { connection: this.#connection, prefix: bullPrefix(o.redisUrl, o.prefix) });
    this.queue.on('error', () => undefined);
  }

  async add(data: SyncJobData): Promise<void> {
    await this.queue.add('sync-local-files', data, { jobId: data.jobId, attempts: SYNC_ATTEMPTS, backoff: { type: 'exponential', delay: SYNC_BACKOFF_MS }, removeOnComplete: true, removeOnFail: 1000 });
  }

  async close(): Promise<void> {
    await within(this.queue.close(), 1000);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}

/** The consumer, on nodes whose role runs jobs. */
export class SyncWorker {
  readonly #connection: RedisClient;
  #closing = false;
  readonly worker: Worker<SyncJobData, SyncOutcome>;

  constructor(o: { redisUrl: string; prefix: string; deps: SyncDeps; concurrency?: number }) {
    this.#connection = bullConnection(o.redisUrl, 'worker', () => this.#closing);
    this.worker = new Worker<SyncJobData, SyncOutcome>(
      SYNC_QUEUE,
      (job: Job<SyncJobData>, _token?: string, signal?: AbortSignal) => runSync(o.deps, job.data, signal ?? new AbortController().signal, job.attemptsMade + 1 >= (job.opts.attempts ?? 1)),
      { connection: this.#connection, prefix: bullPrefix(o.redisUrl, o.prefix), concurrency: o.concurrency ?? SYNC_CONCURRENCY },
    );
    this.worker.on('error', () => undefined);
    this.worker.on('failed', (job, err) => o.deps.logger.warn({ syncJobId: job?.data.jobId, attempts: job?.attemptsMade, err: { name: err?.name, reason: (err as { failure?: { reason?: string } })?.failure?.reason } }, 'sync job attempt failed'));
  }

  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await closeWorker(this.worker, this.#connection, timeoutMs);
  }
}
