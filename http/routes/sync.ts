// Offline sync of a device's recordings (docs/sync.md): POST /v2/sync-local-files answers 202 with a job to poll at
// GET /v2/sync-local-files/{job_id}; large files go up first as resumable uploads (create, read the offset, append).
import { Type } from '@sinclair/typebox';
import { EngineError } from '../../engine/errors.js';
import { boundaryOf, parseMultipart, MultipartError } from '../../engine/voice/multipart.js';
import { SYNC_MAX_BYTES, SYNC_MAX_FILES, SYNC_POLL_S, syncJobView, type IncomingFile } from '../../engine/sync/batch.js';
import { MAX_OPEN_UPLOAD_BYTES, MAX_OPEN_UPLOADS, UploadConflict, uploadExpiresAtMs, UPLOAD_IDLE_MS } from '../../engine/sync/uploads.js';
import { notFound } from './common.js';
import type { AppRoute, Services } from './types.js';

/** Room for a form's boundaries and part headers beyond the batch's bytes. */
const FORM_OVERHEAD_BYTES = 1024 * 1024;
/** One append's largest body: a client sends a file in parts of at most this. */
export const SYNC_MAX_PATCH_BYTES = 16 * 1024 * 1024;

const bad = (reason: string): EngineError => new EngineError('ENG_ERR_SYNC_INVALID_FILE', { reason });

const JobView = Type.Object({ job_id: Type.String(), status: Type.String({ description: '`queued`, `running`, `completed` or `failed`' }), poll_interval_s: Type.Integer() }, { title: 'SyncJob', description: 'an offline sync batch: its state, progress per file and the conversations it placed audio in', additionalProperties: true });
const UploadView = Type.Object({ upload_id: Type.String(), filename: Type.String(), size: Type.Integer(), offset: Type.Integer() }, { title: 'SyncUpload', description: 'a resumable upload: its declared size and how many bytes are stored' });

/** The files of a batch request: a form's `files`, or `{"uploads": [ids]}` naming finished uploads. */
async function incoming(s: Services, uid: string, contentType: string | undefined, raw: Buffer | undefined): Promise<IncomingFile[]> {
  if (raw === undefined || raw.byteLength === 0) throw bad('The request body is empty.');
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  if (type === 'multipart/form-data') {
    const boundary = boundaryOf(contentType);
    if (boundary === undefined) throw bad('A multipart/form-data body needs a boundary.');
    let parts;
    try {
      parts = parseMultipart(raw, boundary);
    } catch (err) {
      if (err instanceof MultipartError) throw bad(err.reason);
      throw err;
    }
    return parts.filter((p) => p.name === 'files').map((p, i) => {
      if (p.filename === undefined) throw bad(`files[${i}]: each of files must be a file with a name`);
      return { filename: p.filename, bytes: p.data };
    });
  }
  if (type === 'application/json') {
    let ids: unknown;
    try {
      ids = (JSON.parse(raw.toString('utf8')) as { uploads?: unknown }).uploads;
    } catch {
      throw bad('The body is not JSON.');
    }
    if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string')) throw bad('uploads must be a list of upload ids');
    if (ids.length > SYNC_MAX_FILES) throw new EngineError('ENG_ERR_SYNC_BATCH_TOO_LARGE', { limit: `${SYNC_MAX_FILES} files` });
    const out: IncomingFile[] = [];
    for (const [i, id] of (ids as string[]).entries()) {
      const u = await s.sync.uploads.get(id);
      if (!u || u.uid !== uid) throw bad(`uploads[${i}]: no such upload`);
      if (u.offset !== u.size) throw bad(`uploads[${i}]: the upload is not complete (${u.offset} of ${u.size} bytes)`);
      out.push({ filename: u.filename, bytes: await s.sync.uploads.read(id), uploadId: id });
    }
    return out;
  }
  throw bad('Content-Type must be multipart/form-data or application/json.');
}

/** When a user with too many unfinished uploads may ask again: batches take minutes to finish. */
const OPEN_UPLOADS_RETRY_S = 60;

/** As tus: the stored offset, the declared length, and when the upload is removed if nothing more comes. */
function uploadHeaders(offset: number, size: number, expiresAtMs: number): Record<string, string> {
  return { 'upload-offset': String(offset), 'upload-length': String(size), 'upload-expires': new Date(expiresAtMs).toUTCString(), 'cache-control': 'no-store' };
}

export function syncRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'post',
      path: '/v2/sync-local-files',
      operationId: 'syncLocalFiles',
      tags: ['Sync'],
      summary: 'Sync recordings a device made offline',
      description:
        `Up to ${SYNC_MAX_FILES} files, ${SYNC_MAX_BYTES} bytes and 3,600 s of audio per batch (413 beyond). Answers 202 with ` +
        'a job to poll; the audio is transcribed and placed into the user\'s conversations by the start time in each file\'s name. ' +
        'A file whose content was synced before is marked `duplicate` and not transcribed again. 429 with `Retry-After` while ' +
        'two batches of the user are under way or past four hours of audio in the hour.',
      auth: { kind: 'id_token' },
      rawBody: {
        description: 'a form of `files`, or JSON `{"uploads": [upload_id, ...]}` naming finished resumable uploads',
        content: {
          'multipart/form-data': Type.Object({ files: Type.Array(Type.String({ format: 'binary' }), { description: '`<name>_<unix-ts>[_fs<N>].bin`, `<name>_<unix-ts>_<codec>.bin` or `<name>_<unix-ts>.wav`' }) }),
          'application/json': Type.Object({ uploads: Type.Array(Type.String()) }),
        },
      },
      maxBodyBytes: SYNC_MAX_BYTES + FORM_OVERHEAD_BYTES,
      responses: { 202: { description: 'queued', schema: JobView }, 400: { description: 'a file is not audio, or its name is outside the scheme' }, 413: { description: 'over a batch bound' }, 429: { description: 'fair use: see `Retry-After`' } },
      async handler(ctx) {
        const files = await incoming(s, ctx.auth.uid, ctx.headers['content-type'], ctx.raw);
        const job = await s.sync.batches.start(ctx.auth.uid, files);
        return { status: 202, body: syncJobView(job), headers: { location: `/v2/sync-local-files/${job.id}` } };
      },
    },
    {
      method: 'get',
      path: '/v2/sync-local-files/{job_id}',
      operationId: 'getSyncLocalFilesJob',
      tags: ['Sync'],
      summary: 'Progress and result of a sync batch',
      description: `Poll every \`poll_interval_s\` (${SYNC_POLL_S} s) until \`status\` is \`completed\` or \`failed\`. Another user's job is 404.`,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the job', schema: JobView }, 404: { description: 'no such job of yours' } },
      async handler({ auth, params }) {
        const job = await s.sync.batches.get(auth.uid, params.job_id!);
        if (!job) throw notFound('Sync job');
        return { body: syncJobView(job), headers: { 'cache-control': 'no-store' } };
      },
    },
    {
      method: 'post',
      path: '/v2/sync-local-files/uploads',
      operationId: 'createSyncUpload',
      tags: ['Sync'],
      summary: 'Start a resumable upload of one offline file',
      description:
        `Declares the file's name and length; answers its id and offset 0. Append with PATCH, read the offset with GET. An upload with no append (and not named in a batch) for ${UPLOAD_IDLE_MS / 3600_000} hours is removed; \`Upload-Expires\` says when. ` +
        `A user may have ${MAX_OPEN_UPLOADS} unfinished uploads of ${MAX_OPEN_UPLOAD_BYTES / 1024 / 1024} MiB in all (open, or in a batch not yet done): 429 with \`Retry-After\` beyond.`,
      auth: { kind: 'id_token' },
      body: Type.Object({ filename: Type.String({ minLength: 1, maxLength: 200 }), size: Type.Integer({ minimum: 1 }) }, { title: 'SyncUploadCreate', description: 'a file to upload in parts: its name (the naming scheme of offline sync) and its length in bytes' }),
      responses: { 201: { description: 'created', schema: UploadView }, 413: { description: 'larger than a batch may be' }, 429: { description: 'too many unfinished uploads: see `Retry-After`' } },
      async handler({ auth, body }) {
        const { filename, size } = body as { filename: string; size: number };
        if (size > SYNC_MAX_BYTES) throw new EngineError('ENG_ERR_SYNC_BATCH_TOO_LARGE', { limit: `${SYNC_MAX_BYTES} bytes` });
        if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/.test(filename)) throw bad('a file name may hold only letters, digits, dots, dashes and underscores');
        const open = await s.sync.uploads.openFor(auth.uid);
        if (open.count >= MAX_OPEN_UPLOADS || open.bytes + size > MAX_OPEN_UPLOAD_BYTES) {
          const reason = `At most ${MAX_OPEN_UPLOADS} unfinished uploads of ${MAX_OPEN_UPLOAD_BYTES / 1024 / 1024} MiB in all: sync or finish those you have`;
          throw new EngineError('ENG_ERR_SYNC_FAIR_USE', { reason, seconds: OPEN_UPLOADS_RETRY_S }, { headers: { 'retry-after': String(OPEN_UPLOADS_RETRY_S) } });
        }
        const u = await s.sync.uploads.create({ uid: auth.uid, filename, size, createdAtMs: s.clock.now() });
        return { status: 201, body: { upload_id: u.id, filename, size, offset: 0 }, headers: { ...uploadHeaders(0, size, uploadExpiresAtMs(u)), location: `/v2/sync-local-files/uploads/${u.id}` } };
      },
    },
    {
      method: 'get',
      path: '/v2/sync-local-files/uploads/{upload_id}',
      operationId: 'getSyncUpload',
      tags: ['Sync'],
      summary: 'The offset of a resumable upload',
      description: 'How many bytes are stored (also in `Upload-Offset`): a client that lost its connection continues from there.',
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the upload', schema: UploadView }, 404: { description: 'no such upload of yours' } },
      async handler({ auth, params }) {
        const u = await s.sync.uploads.get(params.upload_id!);
        if (!u || u.uid !== auth.uid) throw notFound('Upload');
        return { body: { upload_id: u.id, filename: u.filename, size: u.size, offset: u.offset }, headers: uploadHeaders(u.offset, u.size, uploadExpiresAtMs(u)) };
      },
    },
    {
      method: 'patch',
      path: '/v2/sync-local-files/uploads/{upload_id}',
      operationId: 'appendSyncUpload',
      tags: ['Sync'],
      summary: 'Append bytes to a resumable upload',
      description:
        `\`Upload-Offset\` must equal the stored offset (409 otherwise, with the stored one). At most ${SYNC_MAX_PATCH_BYTES} bytes per ` +
        'request; the bytes are on disk before the answer names the new offset. A request cut off mid-body stores none of its bytes.',
      auth: { kind: 'id_token' },
      rawBody: { description: 'the next bytes of the file', content: { 'application/offset+octet-stream': Type.String({ format: 'binary' }) } },
      maxBodyBytes: SYNC_MAX_PATCH_BYTES,
      responses: { 200: { description: 'appended', schema: UploadView }, 409: { description: 'Upload-Offset is not the stored offset' }, 404: { description: 'no such upload of yours' } },
      async handler({ auth, params, headers, raw }) {
        const u = await s.sync.uploads.get(params.upload_id!);
        if (!u || u.uid !== auth.uid) throw notFound('Upload');
        const sent = headers['upload-offset'];
        if (sent === undefined || !/^\d{1,12}$/.test(sent)) throw bad('Upload-Offset must be the byte offset the bytes start at');
        try {
          const now = s.clock.now();
          const offset = await s.sync.uploads.append(u.id, Number(sent), raw ?? new Uint8Array(0), now);
          return { body: { upload_id: u.id, filename: u.filename, size: u.size, offset }, headers: uploadHeaders(offset, u.size, uploadExpiresAtMs({ ...u, touchedAtMs: now })) };
        } catch (err) {
          if (!(err instanceof UploadConflict)) throw err;
          if (err.kind === 'length') throw bad(`the bytes run past the declared length of ${u.size}`);
          throw new EngineError('ENG_ERR_SYNC_OFFSET_CONFLICT', { offset: err.offset }, { headers: uploadHeaders(err.offset, u.size, uploadExpiresAtMs(u)) });
        }
      },
    },
  ];
}
