// Offline sync end to end: the real service, provider_a's live fake, real Opus `.bin`, PCM frame and WAV files made
// from espeak-ng speech; uploads cut off mid-body over a raw socket, batches polled to the end, conversations by
// wall-clock time, and the conversation-created webhook at a local receiver.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { speak, silence, concat } from '../helpers/speech.js';
import { opusBinFile, writeWav } from '../helpers/codec-fixtures.js';
import { until } from '../helpers/until.js';
import { receiver, setUserHook, type Receiver } from '../helpers/webhooks.js';
import { startFakeDeepgram, type FakeDeepgram } from '../fakes/deepgram-server.js';
import { SyncRepository } from '../../engine/db/sync-jobs.js';
import { SYNC_MAX_FILES } from '../../engine/sync/batch.js';

/** Each file's audio as devices write it: 4-byte little-endian lengths, each before one frame. */
function framed(frames: Uint8Array[]): Buffer {
  return Buffer.concat(frames.flatMap((f) => {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(f.byteLength);
    return [len, Buffer.from(f)];
  }));
}

function pcmBin(pcm: Int16Array): Buffer {
  const frames: Uint8Array[] = [];
  for (let at = 0; at < pcm.length; at += 320) frames.push(new Uint8Array(pcm.slice(at, at + 320).buffer));
  return framed(frames);
}

interface Rig {
  ts: TestService;
  fake: FakeDeepgram;
  rx: Receiver;
  /** Three recordings: two 20 s apart, the third 3 minutes after the second ends. */
  files: { name: string; bytes: Buffer }[];
}

async function rig(t: Test): Promise<Rig> {
  const fake = await startFakeDeepgram({ apiKey: 'dg-key', fallback: { kind: 'accept', autoEveryS: 2 } });
  t.teardown(() => fake.close());
  const ts = await startService(t, { env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_API_KEY: 'dg-key', PROVIDER_A_URL: fake.url, WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const dir = mkdtempSync(path.join(tmpdir(), 'sync-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const voice = concat(speak(dir, 'Remind me to call the dentist tomorrow', 'a'), silence(4));
  const t0 = Math.floor(ts.clock.now() / 1000) - 86400;
  const seconds = Math.ceil(voice.length / 16000);
  return {
    ts,
    fake,
    rx: await receiver(t),
    files: [
      { name: `rec_${t0}_fs320.bin`, bytes: opusBinFile(voice) },
      { name: `rec_${t0 + seconds + 20}_pcm16.bin`, bytes: pcmBin(voice) },
      { name: `rec_${t0 + 2 * seconds + 20 + 180}.wav`, bytes: readFileSync(writeWav(dir, 'c', voice, 16000)) },
    ],
  };
}

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

function form(files: { name: string; bytes: Uint8Array }[]): FormData {
  const f = new FormData();
  for (const file of files) f.append('files', new Blob([file.bytes]), file.name);
  return f;
}

async function postBatch(r: Rig, token: string, body: FormData | object): Promise<Response> {
  const json = !(body instanceof FormData);
  return fetch(`${r.ts.url}/v2/sync-local-files`, { method: 'POST', headers: { ...auth(token), ...(json ? { 'content-type': 'application/json' } : {}) }, body: json ? JSON.stringify(body) : body });
}

/** Polls the job as a client would, until it has finished. */
async function finished(r: Rig, token: string, jobId: string): Promise<any> {
  let job: any;
  await until(async () => {
    // The provider streams' waits (finalize, close) run on the service's scheduler, which the test drives.
    r.ts.clock.advance(250);
    await r.ts.service.scheduler.tick();
    job = await (await fetch(`${r.ts.url}/v2/sync-local-files/${jobId}`, { headers: auth(token) })).json();
    return job.status === 'completed' || job.status === 'failed';
  }, { what: 'the sync job to finish', timeoutMs: 60_000 });
  return job;
}

/** A PATCH whose body is cut off after `sent` of its bytes: the socket is destroyed mid-request. */
async function cutPatch(r: Rig, token: string, id: string, offset: number, bytes: Buffer, sent: number): Promise<void> {
  const port = new URL(r.ts.url).port;
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(`PATCH /v2/sync-local-files/uploads/${id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nUpload-Offset: ${offset}\r\nContent-Type: application/offset+octet-stream\r\nContent-Length: ${bytes.byteLength}\r\n\r\n`);
  await new Promise<void>((resolve) => socket.write(bytes.subarray(0, sent), () => resolve()));
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.destroy();
}

async function offsetOf(r: Rig, token: string, id: string): Promise<number> {
  const res = await fetch(`${r.ts.url}/v2/sync-local-files/uploads/${id}`, { headers: auth(token) });
  return Number(res.headers.get('upload-offset'));
}

async function patch(r: Rig, token: string, id: string, offset: number, bytes: Buffer): Promise<Response> {
  return fetch(`${r.ts.url}/v2/sync-local-files/uploads/${id}`, { method: 'PATCH', headers: { ...auth(token), 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: bytes });
}

/** Uploads a file in 3 parts; with `cut`, the second and third parts are each first cut off halfway, then resumed. */
async function upload(r: Rig, token: string, file: { name: string; bytes: Buffer }, cut: boolean): Promise<string> {
  const created = await fetch(`${r.ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { ...auth(token), 'content-type': 'application/json' }, body: JSON.stringify({ filename: file.name, size: file.bytes.byteLength }) });
  const { upload_id: id } = (await created.json()) as { upload_id: string };
  const part = Math.ceil(file.bytes.byteLength / 3);
  for (let i = 0; i < 3; i++) {
    const offset = await offsetOf(r, token, id);
    const bytes = file.bytes.subarray(offset, Math.min(file.bytes.byteLength, offset + part));
    if (cut && i > 0) {
      await cutPatch(r, token, id, offset, bytes, bytes.byteLength >> 1);
      if ((await offsetOf(r, token, id)) !== offset) throw new Error('a cut-off request moved the offset');
    }
    const res = await patch(r, token, id, offset, bytes);
    if (res.status !== 200) throw new Error(`append failed: ${res.status}`);
  }
  return id;
}

/** The user's conversations by start, with their transcripts. */
async function conversationsOf(r: Rig, uid: string): Promise<{ id: string; status: string; startedAtMs: number; segments: { text: string; start: number; end: number }[] }[]> {
  const { store, conversations } = r.ts.service.services;
  const spans = await new SyncRepository(store.knex).spans(uid, 0, r.ts.clock.now() + 86400_000);
  return Promise.all(spans.map(async (c) => ({ id: c.id, status: c.status, startedAtMs: c.startedAtMs, segments: (await conversations.segments(c.id)).map(({ text, start, end }) => ({ text, start, end })) })));
}

/** The node's counters, by name and labels as the exposition writes them. */
async function metrics(r: Rig): Promise<Map<string, number>> {
  const text = await (await fetch(`${r.ts.url}/metrics`)).text();
  return new Map(text.split('\n').filter((l) => l.startsWith('sync_')).map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]));
}

/** Conversation ids among the deliveries that name one of `ids`. */
function hooksFor(r: Rig, ids: readonly string[]): string[] {
  return r.rx.received.map((x) => JSON.parse(x.body.toString()).id as string).filter((id) => ids.includes(id));
}

t.test('offline sync', async (t) => {
  const r = await rig(t);

  t.test('a batch with a 3-minute gap yields two processed conversations, each announced by webhook; a re-upload changes nothing', async (t) => {
    const uid = `sync-${randomUUID()}`;
    const token = await r.ts.token(uid);
    await setUserHook(r.ts, uid, r.rx.url);
    const res = await postBatch(r, token, form(r.files));
    t.equal(res.status, 202);
    const accepted = (await res.json()) as any;
    t.equal(accepted.status, 'queued');
    t.equal(accepted.poll_interval_s, 5);
    const job = await finished(r, token, accepted.job_id);
    t.equal(job.status, 'completed');
    t.same(job.files.map((f: any) => f.status), ['done', 'done', 'done']);
    const convs = await conversationsOf(r, uid);
    t.equal(convs.length, 2, 'two conversations: the first two files together, the third after the gap');
    t.ok(Math.abs(convs[0]!.startedAtMs - Date.parse(job.files[0].started_at)) < 3000, 'the first starts when the first file does');
    t.ok(convs[0]!.segments.length > convs[1]!.segments.length, 'the first holds two files\' segments');
    await until(async () => (await conversationsOf(r, uid)).every((c) => c.status === 'completed'), { what: 'processing', timeoutMs: 30_000 });
    const ids = convs.map((c) => c.id);
    await until(() => new Set(hooksFor(r, ids)).size === 2, { what: 'both webhooks', timeoutMs: 30_000 });
    const hooks = hooksFor(r, ids).length;

    const again = await postBatch(r, token, form(r.files));
    t.equal(again.status, 202);
    const second = await finished(r, token, ((await again.json()) as any).job_id);
    t.same(second.files.map((f: any) => f.status), ['duplicate', 'duplicate', 'duplicate']);
    const after = await conversationsOf(r, uid);
    t.same(after.map((c) => c.segments), convs.map((c) => c.segments), 'the transcripts are unchanged');
    t.equal(after.length, 2);
    t.equal(hooksFor(r, ids).length, hooks, 'no webhook fired again');
  });

  t.test('uploads cut off twice mid-body resume from Upload-Offset and yield the same conversations as uninterrupted ones', async (t) => {
    const plain = `sync-${randomUUID()}`;
    const cut = `sync-${randomUUID()}`;
    const plainToken = await r.ts.token(plain);
    const cutToken = await r.ts.token(cut);
    const plainIds = [];
    const cutIds = [];
    for (const f of r.files) {
      plainIds.push(await upload(r, plainToken, f, false));
      cutIds.push(await upload(r, cutToken, f, true));
    }
    const a = await finished(r, plainToken, ((await (await postBatch(r, plainToken, { uploads: plainIds })).json()) as any).job_id);
    const b = await finished(r, cutToken, ((await (await postBatch(r, cutToken, { uploads: cutIds })).json()) as any).job_id);
    t.equal(a.status, 'completed');
    t.equal(b.status, 'completed');
    const strip = (cs: Awaited<ReturnType<typeof conversationsOf>>): unknown => cs.map((c) => ({ startedAtMs: c.startedAtMs, segments: c.segments }));
    const plainConvs = await conversationsOf(r, plain);
    t.equal(plainConvs.length, 2);
    t.same(strip(await conversationsOf(r, cut)), strip(plainConvs));
  });

  t.test('a PATCH at a stale offset is 409 with the stored offset', async (t) => {
    const token = await r.ts.token(`sync-${randomUUID()}`);
    const created = await fetch(`${r.ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { ...auth(token), 'content-type': 'application/json' }, body: JSON.stringify({ filename: r.files[0]!.name, size: 100 }) });
    const { upload_id: id } = (await created.json()) as { upload_id: string };
    t.equal((await patch(r, token, id, 0, Buffer.alloc(40))).status, 200);
    const stale = await patch(r, token, id, 0, Buffer.alloc(40));
    t.equal(stale.status, 409);
    t.equal(stale.headers.get('upload-offset'), '40');
    t.equal((await patch(r, token, id, 40, Buffer.alloc(80))).status, 400, 'past the declared length');
  });

  t.test('bad input is a clear 4xx and queues nothing', async (t) => {
    const token = await r.ts.token(`sync-${randomUUID()}`);
    const ts = r.files[0]!.name.split('_')[1];
    const notAudio = await postBatch(r, token, form([{ name: `rec_${ts}.wav`, bytes: Buffer.from('this is not a wave file at all') }]));
    t.equal(notAudio.status, 400);
    t.match(((await notAudio.json()) as any).detail, /files\[0\]: a \.wav file is not RIFF\/WAVE audio/);
    const badName = await postBatch(r, token, form([{ name: 'recording.wav', bytes: r.files[2]!.bytes }]));
    t.equal(badName.status, 400);
    t.match(((await badName.json()) as any).detail, /must be named/);
    const future = await postBatch(r, token, form([{ name: `rec_${Math.floor(r.ts.clock.now() / 1000) + 86400}_fs320.bin`, bytes: r.files[0]!.bytes }]));
    t.equal(future.status, 400);
    const many = await postBatch(r, token, form(Array.from({ length: SYNC_MAX_FILES + 1 }, () => r.files[0]!)));
    t.equal(many.status, 413);
    t.equal(many.headers.get('x-error-code'), 'ENG_ERR_SYNC_BATCH_TOO_LARGE');
    const huge = await fetch(`${r.ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { ...auth(token), 'content-type': 'application/json' }, body: JSON.stringify({ filename: r.files[0]!.name, size: 65 * 1024 * 1024 }) });
    t.equal(huge.status, 413);
  });

  t.test('a third batch while two are under way is 429 with Retry-After; taken once they finish; counted in /metrics', async (t) => {
    const token = await r.ts.token(`sync-${randomUUID()}`);
    const before = await metrics(r);
    // All three at once, and the provider slow to take the first two's streams, so neither can finish before the
    // third arrives: two are taken, one is refused.
    const streams = r.fake.streams.length;
    r.fake.script({ kind: 'accept', autoEveryS: 2, upgradeDelayMs: 3000 }, { kind: 'accept', autoEveryS: 2, upgradeDelayMs: 3000 });
    const files = r.files.slice(0, 3);
    const answers = await Promise.all(files.map((f) => postBatch(r, token, form([f]))));
    t.same(answers.map((a) => a.status).sort(), [202, 202, 429]);
    const refused = answers.find((a) => a.status === 429)!;
    const jobs: string[] = [];
    for (const a of answers) if (a.status === 202) jobs.push(((await a.json()) as any).job_id);
    t.equal(refused.headers.get('retry-after'), '5', 'retry once a poll interval passed');
    t.equal(refused.headers.get('x-error-code'), 'ENG_ERR_SYNC_FAIR_USE');
    t.match(((await refused.json()) as any).detail, /At most 2 sync batches may be under way at once/);
    // The provider's connect bound runs on the clock finished() drives: let the slow streams open first.
    await until(() => r.fake.streams.length >= streams + 2, { what: "the first two batches' streams", timeoutMs: 20_000 });
    const done = [];
    for (const id of jobs) done.push(await finished(r, token, id));
    const again = await postBatch(r, token, form([files[answers.indexOf(refused)]!]));
    t.equal(again.status, 202, 'the same batch is taken once the others finished');
    done.push(await finished(r, token, ((await again.json()) as any).job_id));
    t.same(done.map((j) => j.status), ['completed', 'completed', 'completed']);

    const after = await metrics(r);
    const delta = (name: string): number => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    t.equal(delta('sync_batches_total{outcome="fair_use"}'), 1);
    t.equal(delta('sync_batches_total{outcome="completed"}'), 3);
    t.equal(delta('sync_files_total{status="done"}'), 3);
    const audioS = done.reduce((n, j) => n + (j.audio_s as number), 0);
    t.ok(Math.abs(delta('sync_audio_seconds_total') - audioS) < 0.01, `audio seconds synced: ${delta('sync_audio_seconds_total')} (the batches say ${audioS})`);
  });

  t.test("another user's job and upload are 404", async (t) => {
    const owner = await r.ts.token(`sync-${randomUUID()}`);
    const other = await r.ts.token(`sync-${randomUUID()}`);
    const res = await postBatch(r, owner, form([r.files[2]!]));
    const { job_id: jobId } = (await res.json()) as any;
    t.equal((await fetch(`${r.ts.url}/v2/sync-local-files/${jobId}`, { headers: auth(other) })).status, 404);
    t.equal((await fetch(`${r.ts.url}/v2/sync-local-files/${jobId}`, { headers: auth(owner) })).status, 200);
    const created = await fetch(`${r.ts.url}/v2/sync-local-files/uploads`, { method: 'POST', headers: { ...auth(owner), 'content-type': 'application/json' }, body: JSON.stringify({ filename: r.files[0]!.name, size: 10 }) });
    const { upload_id: id } = (await created.json()) as { upload_id: string };
    t.equal((await fetch(`${r.ts.url}/v2/sync-local-files/uploads/${id}`, { headers: auth(other) })).status, 404);
    t.equal((await patch(r, other, id, 0, Buffer.alloc(5))).status, 404);
    await finished(r, owner, jobId);
  });
});
