// A sync batch whose files the node cannot decode (its decoder thread is gone): retried while attempts remain, and on
// the last one its files fail with that cause, not with a speech engine's, and their uploads and hashes are released.
import t from 'tap';
import { openTestStore } from '../../helpers/stores.js';
import { createLogger } from '../../../engine/logger.js';
import { SyncFileStatus, SyncJobStatus, SyncRepository } from '../../../engine/db/sync-jobs.js';
import { UploadStore } from '../../../engine/sync/uploads.js';
import { NO_DECODER, runSync, type SyncDeps } from '../../../engine/sync/jobs.js';

t.test('a decoder that cannot run fails the last attempt with its own cause', async (t) => {
  const store = openTestStore(t, 'sqlite');
  await store.migrate();
  const sync = new SyncRepository(store.knex);
  const uploads = new UploadStore(t.testdir());
  const now = Date.parse('2026-12-01T10:00:00Z');
  const uploadId = await uploads.put({ uid: 'u1', filename: 'rec_1764583200.wav', createdAtMs: now }, new Uint8Array(64));
  const file = { uploadId, filename: 'rec_1764583200.wav', sha256: 'a'.repeat(64), bytes: 64, startedAtMs: now - 3600_000, durationS: 2, status: SyncFileStatus.PENDING, segments: 0, skipped: 0, conversationIds: [], error: null };
  await sync.claim('u1', 'job-1', [file.sha256], now);
  await sync.create({ id: 'job-1', userId: 'u1', files: [file], audioS: 2, now });
  let decodes = 0;
  const deps = {
    sync,
    uploads,
    logger: createLogger('silent'),
    now: () => now,
    ensureUser: async () => undefined,
    language: async () => 'en',
    decode: async () => {
      decodes++;
      throw new Error('the file decoder is closed');
    },
  } as unknown as SyncDeps;
  const signal = new AbortController().signal;

  await t.rejects(runSync(deps, { jobId: 'job-1', uid: 'u1' }, signal, false), /decoder is closed/, 'an attempt with more to come is retried');
  t.equal((await sync.get('job-1'))?.files[0]?.status, SyncFileStatus.PENDING, 'the file waits for the next attempt');
  t.ok(await uploads.get(uploadId), 'its bytes are kept for it');

  t.equal(await runSync(deps, { jobId: 'job-1', uid: 'u1' }, signal, true), SyncJobStatus.FAILED);
  const [f] = (await sync.get('job-1'))!.files;
  t.equal(f?.status, SyncFileStatus.FAILED);
  t.equal(f?.error, NO_DECODER, 'the file is failed for the decoder, not for the speech engines');
  t.notMatch(f?.error, /speech engine/);
  t.equal(await uploads.get(uploadId), undefined, 'its upload is removed');
  t.equal((await sync.claim('u1', 'job-2', [file.sha256], now)).size, 1, 'its content may be synced again');
  t.equal(decodes, 2);
});
