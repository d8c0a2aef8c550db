// A batch of offline files from request to queued job: bounds (files, bytes, seconds), fair use (batches under way,
// audio per hour), content hashes (a file taken before is not transcribed again), and the job's public view.
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import { EngineError } from '../errors.js';
import { SyncFileStatus, type SyncFile, type SyncJobRecord, type SyncRepository } from '../db/sync-jobs.js';
import { AudioInputError } from '../voice/audio.js';
import { probeSyncFile, type SyncProbe } from './files.js';
import type { SyncQueue } from './jobs.js';
import type { UploadStore } from './uploads.js';

/** Batch bounds, as the compatible system's. */
export const SYNC_MAX_FILES = 20;
export const SYNC_MAX_BYTES = 64 * 1024 * 1024;
export const SYNC_MAX_AUDIO_S = 3600;
/** Fair use: batches of one user queued or running at once, and audio seconds one user may sync per clock hour. */
export const SYNC_MAX_UNFINISHED = 2;
export const SYNC_HOURLY_AUDIO_S = 4 * 3600;
/** How often a client should poll a batch, in seconds (also the Retry-After of a refused batch while one runs). */
export const SYNC_POLL_S = 5;

/** One file of a request: bytes sent in the request, or an upload finished before. */
export interface IncomingFile {
  filename: string;
  bytes: Uint8Array;
  uploadId?: string;
}

export interface SyncBatchesOptions {
  repo: SyncRepository;
  uploads: UploadStore;
  queue: SyncQueue;
  redis: RedisClient;
  prefix: string;
  now: () => number;
  /** Counts a refused batch by the status it was refused with. */
  refused?: (outcome: 'invalid' | 'too_large' | 'fair_use') => void;
  /** Reads a file's start, length and hash off the main thread (FileDecoder.probe); without it, on the calling thread. */
  probe?: (bytes: Uint8Array, filename: string, nowMs: number) => Promise<SyncProbe>;
}

/** Longest one batch start holds its user's start lock (and longest another waits for it), in ms. */
const START_LOCK_MS = 10_000;
const START_LOCK_POLL_MS = 20;
const RELEASE_LOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

const REFUSALS: Record<number, 'invalid' | 'too_large' | 'fair_use'> = { 400: 'invalid', 413: 'too_large', 429: 'fair_use' };

export class SyncBatches {
  constructor(readonly o: SyncBatchesOptions) {}

  /** Counts `audioS` against the user's hour; refuses (and counts nothing) past SYNC_HOURLY_AUDIO_S. */
  async #countHour(uid: string, audioS: number): Promise<void> {
    const now = this.o.now();
    const hour = Math.floor(now / 3600_000);
    const key = `${this.o.prefix}:sync:hour:${uid}:${hour}`;
    const total = Number(await this.o.redis.incrbyfloat(key, audioS));
    await this.o.redis.expire(key, 7200);
    if (total > SYNC_HOURLY_AUDIO_S && audioS > 0) {
      await this.o.redis.incrbyfloat(key, -audioS);
      const seconds = Math.max(1, Math.ceil(((hour + 1) * 3600_000 - now) / 1000));
      throw new EngineError('ENG_ERR_SYNC_FAIR_USE', { reason: `At most ${SYNC_HOURLY_AUDIO_S / 3600} hours of audio may be synced per hour`, seconds }, { headers: { 'retry-after': String(seconds) } });
    }
  }

  /** Checks, claims and queues a batch; answers the new job. Throws EngineError (400, 413, 429). */
  async start(uid: string, incoming: readonly IncomingFile[]): Promise<SyncJobRecord> {
    try {
      return await this.#start(uid, incoming);
    } catch (err) {
      const outcome = err instanceof EngineError ? REFUSALS[err.status] : undefined;
      if (outcome) this.o.refused?.(outcome);
      throw err;
    }
  }

  async #start(uid: string, incoming: readonly IncomingFile[]): Promise<SyncJobRecord> {
    if (incoming.length === 0) throw new EngineError('ENG_ERR_SYNC_INVALID_FILE', { reason: 'No files provided.' });
    if (incoming.length > SYNC_MAX_FILES) throw new EngineError('ENG_ERR_SYNC_BATCH_TOO_LARGE', { limit: `${SYNC_MAX_FILES} files` });
    if (incoming.reduce((n, f) => n + f.bytes.byteLength, 0) > SYNC_MAX_BYTES) throw new EngineError('ENG_ERR_SYNC_BATCH_TOO_LARGE', { limit: `${SYNC_MAX_BYTES} bytes` });
    const now = this.o.now();
    const probe = this.o.probe ?? ((bytes, filename, nowMs) => Promise.resolve(probeSyncFile(bytes, filename, nowMs)));
    const parsed = await Promise.all(
      incoming.map(async (f, i) => {
        try {
          const { sha256, ...audio } = await probe(f.bytes, f.filename, now);
          return { f, audio, sha256 };
        } catch (err) {
          if (err instanceof AudioInputError) throw new EngineError('ENG_ERR_SYNC_INVALID_FILE', { reason: `files[${i}]: ${err.reason}` });
          throw err;
        }
      }),
    );
    const audioS = parsed.reduce((n, p) => n + p.audio.durationS, 0);
    if (audioS > SYNC_MAX_AUDIO_S) throw new EngineError('ENG_ERR_SYNC_BATCH_TOO_LARGE', { limit: `${SYNC_MAX_AUDIO_S} seconds of audio` });
    const id = randomUUID();
    // One start at a time per user, on every node: batches sent together must not all pass the count below.
    const lock = `${this.o.prefix}:sync:start:${uid}`;
    for (let waited = 0; (await this.o.redis.set(lock, id, 'PX', START_LOCK_MS, 'NX')) !== 'OK'; waited += START_LOCK_POLL_MS) {
      if (waited >= START_LOCK_MS) throw new EngineError('ENG_ERR_SYNC_FAIR_USE', { reason: 'Another sync batch of this account is being started', seconds: 1 }, { headers: { 'retry-after': '1' } });
      await new Promise((r) => setTimeout(r, START_LOCK_POLL_MS));
    }
    try {
      return await this.#claimAndQueue(uid, id, parsed, now);
    } finally {
      // Only this start's own lock (it may have expired and gone to another): compared and deleted in one step.
      await this.o.redis.eval(RELEASE_LOCK, 1, lock, id).catch(() => undefined);
    }
  }

  async #claimAndQueue(uid: string, id: string, parsed: readonly { f: IncomingFile; audio: { durationS: number; startedAtMs: number }; sha256: string }[], now: number): Promise<SyncJobRecord> {
    if ((await this.o.repo.unfinished(uid)) >= SYNC_MAX_UNFINISHED) {
      throw new EngineError('ENG_ERR_SYNC_FAIR_USE', { reason: `At most ${SYNC_MAX_UNFINISHED} sync batches may be under way at once`, seconds: SYNC_POLL_S }, { headers: { 'retry-after': String(SYNC_POLL_S) } });
    }
    const taken = await this.o.repo.claim(uid, id, parsed.map((p) => p.sha256), now);
    const files: SyncFile[] = [];
    let newAudioS = 0;
    for (const { f, audio, sha256 } of parsed) {
      // A hash is taken by its first file in this batch; a second copy, or a file synced before, is a duplicate.
      const fresh = taken.delete(sha256);
      let uploadId = f.uploadId ?? '';
      if (fresh) {
        if (uploadId === '') uploadId = await this.o.uploads.put({ uid, filename: f.filename, createdAtMs: now }, f.bytes);
        else await this.o.uploads.touch(uploadId, now); // the job has the whole idle time to read it
      } else if (f.uploadId !== undefined) await this.o.uploads.remove(f.uploadId);
      if (fresh) newAudioS += audio.durationS;
      files.push({ uploadId, filename: f.filename, sha256, bytes: f.bytes.byteLength, startedAtMs: audio.startedAtMs, durationS: Math.round(audio.durationS * 1000) / 1000, status: fresh ? SyncFileStatus.PENDING : SyncFileStatus.DUPLICATE, segments: 0, skipped: 0, conversationIds: [], error: null });
    }
    try {
      await this.#countHour(uid, newAudioS);
    } catch (err) {
      for (const f of files) if (f.status === SyncFileStatus.PENDING) await this.o.repo.release(uid, f.sha256);
      throw err;
    }
    await this.o.repo.create({ id, userId: uid, files, audioS: newAudioS, now });
    await this.o.queue.add({ jobId: id, uid });
    return (await this.o.repo.get(id))!;
  }

  /** The user's job, undefined when there is none by that id or it is another user's. */
  async get(uid: string, id: string): Promise<SyncJobRecord | undefined> {
    if (!/^[0-9a-f-]{36}$/.test(id)) return undefined;
    const job = await this.o.repo.get(id);
    return job && job.userId === uid ? job : undefined;
  }
}

/** The public view of a job: status, progress, and per file what became of it. */
export function syncJobView(job: SyncJobRecord): Record<string, unknown> {
  const finished = job.files.filter((f) => f.status !== SyncFileStatus.PENDING).length;
  return {
    job_id: job.id,
    status: job.status,
    poll_interval_s: SYNC_POLL_S,
    progress: { files_total: job.files.length, files_finished: finished },
    audio_s: Math.round(job.audioS * 1000) / 1000,
    conversation_ids: [...new Set(job.files.flatMap((f) => f.conversationIds))],
    files: job.files.map((f) => ({
      filename: f.filename,
      status: f.status,
      started_at: new Date(f.startedAtMs).toISOString(),
      duration_s: f.durationS,
      segments: f.segments,
      skipped_segments: f.skipped,
      conversation_ids: f.conversationIds,
      ...(f.error !== null ? { error: f.error } : {}),
    })),
    created_at: job.createdAt,
    updated_at: job.updatedAt,
  };
}
