// Offline sync's store: the batches (sync_jobs, each file's progress as JSON), the content hashes already taken
// (sync_files), and the user's conversations near a stretch of wall-clock time, where synced segments are placed.
import type { Knex } from 'knex';
import { isoNow } from './store.js';
import { execute, select } from './prepared.js';

export const SyncJobStatus = { QUEUED: 'queued', RUNNING: 'running', COMPLETED: 'completed', FAILED: 'failed' } as const;
export type SyncJobStatus = (typeof SyncJobStatus)[keyof typeof SyncJobStatus];

export const SyncFileStatus = { PENDING: 'pending', DONE: 'done', DUPLICATE: 'duplicate', FAILED: 'failed' } as const;
export type SyncFileStatus = (typeof SyncFileStatus)[keyof typeof SyncFileStatus];

/** One file of a batch as the job sees it and the status route shows it. */
export interface SyncFile {
  /** The upload holding its bytes (under DATA_DIR) until it is done. */
  uploadId: string;
  filename: string;
  sha256: string;
  bytes: number;
  /** Wall-clock start, epoch milliseconds. */
  startedAtMs: number;
  durationS: number;
  status: SyncFileStatus;
  segments: number;
  /** Segments left out because a conversation already covered their time. */
  skipped: number;
  conversationIds: string[];
  /** Public-safe reason of a failed file. */
  error: string | null;
}

export interface SyncJobRecord {
  id: string;
  userId: string;
  status: SyncJobStatus;
  files: SyncFile[];
  audioS: number;
  createdAt: string;
  updatedAt: string;
}

/** A conversation of the user by wall-clock time: where it starts and how far its segments reach. */
export interface ConversationSpan {
  id: string;
  status: string;
  startedAtMs: number;
  /** Seconds from its start to the end of its last segment (0 without segments). */
  lastEndS: number;
}

interface JobRow {
  id: string;
  user_id: string;
  status: SyncJobStatus;
  files: string;
  audio_s: number;
  created_at: string;
  updated_at: string;
}

const toRecord = (r: JobRow): SyncJobRecord => ({
  id: r.id,
  userId: r.user_id,
  status: r.status,
  files: JSON.parse(r.files) as SyncFile[],
  audioS: Number(r.audio_s),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export class SyncRepository {
  constructor(private readonly knex: Knex) {}

  async create(job: { id: string; userId: string; files: SyncFile[]; audioS: number; now: number }): Promise<void> {
    const now = isoNow(job.now);
    await this.knex('sync_jobs').insert({ id: job.id, user_id: job.userId, status: SyncJobStatus.QUEUED, files: JSON.stringify(job.files), audio_s: job.audioS, created_at: now, updated_at: now });
  }

  async get(id: string): Promise<SyncJobRecord | undefined> {
    const [row] = await select<JobRow>(this.knex, 'SELECT * FROM sync_jobs WHERE id = ?', [id]);
    return row ? toRecord(row) : undefined;
  }

  async save(id: string, status: SyncJobStatus, files: readonly SyncFile[], now: number): Promise<void> {
    await execute(this.knex, 'UPDATE sync_jobs SET status = ?, files = ?, updated_at = ? WHERE id = ?', [status, JSON.stringify(files), isoNow(now), id]);
  }

  /** The user's batches not yet finished (queued or running). */
  async unfinished(userId: string): Promise<number> {
    const [row] = await select<{ n: number | string }>(this.knex, 'SELECT COUNT(*) AS n FROM sync_jobs WHERE user_id = ? AND status IN (?, ?)', [userId, SyncJobStatus.QUEUED, SyncJobStatus.RUNNING]);
    return Number(row?.n ?? 0);
  }

  /**
   * Claims content hashes for a batch: answers the ones this call took; a hash taken before (synced, or in a batch
   * under way) is not taken again.
   */
  async claim(userId: string, jobId: string, hashes: readonly string[], now: number): Promise<Set<string>> {
    const taken = new Set<string>();
    for (const sha256 of new Set(hashes)) {
      try {
        await this.knex('sync_files').insert({ user_id: userId, sha256, job_id: jobId, created_at: isoNow(now) });
        taken.add(sha256);
      } catch (err) {
        // A unique violation: the hash is taken. Anything else (the store away) is the caller's failure.
        const [row] = await select<{ job_id: string }>(this.knex, 'SELECT job_id FROM sync_files WHERE user_id = ? AND sha256 = ?', [userId, sha256]);
        if (!row) throw err;
      }
    }
    return taken;
  }

  /** Gives a hash back (its file failed), so that the same file uploaded again is tried again. */
  async release(userId: string, sha256: string): Promise<void> {
    await execute(this.knex, 'DELETE FROM sync_files WHERE user_id = ? AND sha256 = ?', [userId, sha256]);
  }

  /** The user's conversations (not deleted) that start between `fromMs` and `toMs`, with how far their segments reach. */
  async spans(userId: string, fromMs: number, toMs: number): Promise<ConversationSpan[]> {
    const rows = await select<{ id: string; status: string; started_at: string; last_end: number | null }>(
      this.knex,
      'SELECT c.id, c.status, c.started_at, (SELECT MAX(s."end") FROM conversation_segments s WHERE s.conversation_id = c.id) AS last_end ' +
        'FROM conversations c WHERE c.user_id = ? AND c.deleted = ? AND c.started_at >= ? AND c.started_at <= ? ORDER BY c.started_at',
      [userId, false, isoNow(fromMs), isoNow(toMs)],
    );
    return rows.map((r) => ({ id: r.id, status: r.status, startedAtMs: Date.parse(r.started_at), lastEndS: Number(r.last_end ?? 0) }));
  }

  /** Moves a conversation's start earlier by `shiftS` seconds, its segments later by as much (wall-clock times unchanged). */
  async moveStart(conversationId: string, startedAtMs: number, shiftS: number, now: number): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('conversations').where({ id: conversationId }).update({ started_at: isoNow(startedAtMs), updated_at: isoNow(now) });
      await trx('conversation_segments').where({ conversation_id: conversationId }).update({ start: trx.raw('?? + ?', ['start', shiftS]), end: trx.raw('?? + ?', ['end', shiftS]) });
    });
  }
}
