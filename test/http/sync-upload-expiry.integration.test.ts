// Resumable uploads a client gives up: removed with their bytes after a day with no append, announced by
// Upload-Expires, counted in /metrics; an append or a batch naming the upload starts its day again. A user's
// unfinished uploads are bounded, so one account cannot fill the disk.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startService } from '../helpers/service.js';
import { MAX_OPEN_UPLOAD_BYTES, MAX_OPEN_UPLOADS, UPLOAD_IDLE_MS, UploadStore } from '../../engine/sync/uploads.js';
import { SYNC_MAX_BYTES } from '../../engine/sync/batch.js';

const HOUR = 3600_000;

t.test('an upload idle for a day is removed with its bytes; one appended to in that day stays', async (t) => {
  const ts = await startService(t);
  const dir = path.join(ts.dataDir, 'sync');
  const name = `rec_${Math.floor(ts.clock.now() / 1000) - 3600}_fs320.bin`;
  const token = async (): Promise<Record<string, string>> => ({ authorization: `Bearer ${await ts.token('u-expiry')}` });
  const create = async (): Promise<{ id: string; expires: string | null }> => {
    const res = await fetch(`${ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { ...(await token()), 'content-type': 'application/json' }, body: JSON.stringify({ filename: name, size: 100 }) });
    t.equal(res.status, 201);
    return { id: ((await res.json()) as { upload_id: string }).upload_id, expires: res.headers.get('upload-expires') };
  };
  const append = async (id: string, offset: number, n: number): Promise<Response> =>
    fetch(`${ts.url}/v2/sync-local-files/uploads/${id}`, { method: 'PATCH', headers: { ...(await token()), 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: Buffer.alloc(n, 7) });
  const get = async (id: string): Promise<Response> => fetch(`${ts.url}/v2/sync-local-files/uploads/${id}`, { headers: await token() });
  const expired = async (): Promise<number> => {
    const line = (await (await fetch(`${ts.url}/metrics`)).text()).split('\n').find((l) => l.startsWith('sync_uploads_expired_total '));
    return Number(line?.split(' ')[1]);
  };
  const passHours = async (h: number): Promise<void> => {
    ts.clock.advance(h * HOUR);
    await ts.service.scheduler.tick();
  };

  const t0 = ts.clock.now();
  const kept = await create();
  const given = await create();
  t.equal(kept.expires, new Date(t0 + UPLOAD_IDLE_MS).toUTCString(), 'Upload-Expires: a day after creation');
  t.equal((await append(kept.id, 0, 40)).status, 200);
  t.equal((await append(given.id, 0, 30)).status, 200);
  const stray = randomUUID();
  writeFileSync(path.join(dir, `${stray}.part`), Buffer.alloc(10)); // bytes whose description a removal took

  await passHours(23);
  t.equal((await get(given.id)).status, 200, 'still there after 23 hours');
  t.notOk(existsSync(path.join(dir, `${stray}.part`)), 'bytes with no description removed at the first sweep');
  const again = await append(kept.id, 40, 20);
  t.equal(again.status, 200);
  t.equal(again.headers.get('upload-expires'), new Date(ts.clock.now() + UPLOAD_IDLE_MS).toUTCString(), 'an append starts the day again');

  await passHours(2);
  t.equal((await get(given.id)).status, 404, 'idle for 25 hours: gone');
  t.notOk(readdirSync(dir).some((f) => f.startsWith(given.id)), 'its bytes and description removed');
  const left = await get(kept.id);
  t.equal(left.status, 200, 'appended to 2 hours ago: kept');
  t.equal(((await left.json()) as { offset: number }).offset, 60, 'with every byte');
  t.equal(await expired(), 1, 'counted in /metrics');
  t.equal((await append(given.id, 30, 10)).status, 404, 'an append to a removed upload is 404');
});

t.test('a batch naming an upload starts its day again; unreadable descriptions are left alone', async (t) => {
  const store = new UploadStore(t.testdir());
  const t0 = Date.UTC(2026, 0, 1);
  const a = await store.create({ uid: 'u', filename: 'a.bin', size: 4, createdAtMs: t0 });
  const b = await store.create({ uid: 'u', filename: 'b.bin', size: 4, createdAtMs: t0 });
  await store.touch(a.id, t0 + 20 * HOUR);
  writeFileSync(path.join(store.dir, `${randomUUID()}.json`), '{"uid":');
  t.equal(await store.sweep(t0 + UPLOAD_IDLE_MS + 1), 1, 'one removed');
  t.ok(await store.get(a.id), 'the touched upload stays');
  t.equal(await store.get(b.id), undefined, 'the untouched one is gone');
  t.equal(readdirSync(store.dir).filter((f) => f.endsWith('.json')).length, 2, 'the touched one and the unreadable one');
});

t.test('a user\'s unfinished uploads are bounded in number and bytes; others are not held back; a removal frees room', async (t) => {
  const ts = await startService(t);
  const name = `rec_${Math.floor(ts.clock.now() / 1000) - 3600}_fs320.bin`;
  const create = async (uid: string, size: number): Promise<Response> =>
    fetch(`${ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { authorization: `Bearer ${await ts.token(uid)}`, 'content-type': 'application/json' }, body: JSON.stringify({ filename: name, size }) });

  // Declared bytes: three batches' worth of 64 MiB files, then not one byte more.
  const big = [];
  for (let i = 0; i < MAX_OPEN_UPLOAD_BYTES / SYNC_MAX_BYTES; i++) {
    const res = await create('u-bytes', SYNC_MAX_BYTES);
    t.equal(res.status, 201);
    big.push(((await res.json()) as { upload_id: string }).upload_id);
  }
  const over = await create('u-bytes', 1);
  t.equal(over.status, 429, 'past the bytes: refused');
  t.equal(over.headers.get('retry-after'), '60');
  t.equal(over.headers.get('x-error-code'), 'ENG_ERR_SYNC_FAIR_USE');
  t.match(((await over.json()) as { detail: string }).detail, /At most 60 unfinished uploads of 192 MiB in all/);
  t.equal((await create('u-other', SYNC_MAX_BYTES)).status, 201, 'another user is not held back');

  // Count: 60 small uploads, then no more.
  const small = await Promise.all(Array.from({ length: MAX_OPEN_UPLOADS }, () => create('u-count', 10)));
  t.same([...new Set(small.map((r) => r.status))], [201]);
  t.equal((await create('u-count', 10)).status, 429, 'past the count: refused');

  // An upload given up (a day idle) is removed, and its room is free again.
  ts.clock.advance(UPLOAD_IDLE_MS + HOUR);
  await ts.service.scheduler.tick();
  t.equal((await create('u-bytes', SYNC_MAX_BYTES)).status, 201, 'room again once the old uploads are gone');
  t.equal((await create('u-count', 10)).status, 201);
});
