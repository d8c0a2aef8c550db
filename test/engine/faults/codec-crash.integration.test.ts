// A codec thread that dies mid-session: its provider sockets go with it, so every session on it reports stt_failed and
// closes 1011 once the audio its provider had not answered for is kept (then transcribed by the kept-audio job); the
// thread is replaced, the node stays up and takes new sessions. The thread is ended by a frame the test worker treats
// as poison (test/helpers/crash-decode-worker.ts).
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { CRASH_MESSAGE, CRASH_WORKER } from '../../helpers/crash-decode-worker.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';

t.test('a codec thread crash closes its sessions 1011 with their unanswered audio kept; the node goes on', async (t) => {
  const fake = await startFakeDeepgram({ recordAudio: true, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const answer = { afterS: 0.95, words: [{ word: 'before', punctuated_word: 'Before.', speaker: 0, start: 0.2, end: 0.6 }] };
  fake.script({ kind: 'accept', results: [answer] }, { kind: 'accept', results: [] });
  fake.fallback = { kind: 'accept', results: [] };
  const ts = await startService(t, {
    env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key', CODEC_THREADS: '1', VAD_GATE: 'off' },
    tuning: { inlineBusyPct: 0 },
    codecWorker: CRASH_WORKER,
  });
  const pcm = new Int16Array(3 * 16_000);
  let seed = 3;
  for (let i = 0; i < pcm.length; i++) pcm[i] = ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) - 32768;
  const send = (c: Awaited<ReturnType<typeof open>>, from: number, to: number): void => {
    for (let i = from; i < to; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, 3200).slice());
  };
  const a = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await a.ready();
  const b = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  await b.ready();
  const dgA = fake.streams[0]!;
  send(a, 0, 32_000);
  await until(async () => {
    await advance(ts, 100);
    return dgA.resultsSent >= 1 && dgA.bytes >= 64_000 - 3200;
  }, { what: 'two seconds and the first answer at the provider', timeoutMs: 15_000 });

  // The third second is on its way when the thread dies.
  send(a, 32_000, 48_000);
  b.ws.send(CRASH_MESSAGE);
  const failedA = await a.json((m) => m.status === 'stt_failed', 20_000);
  t.match(failedA, { outcome: 'upstream_error', provider: 'provider_a', retryable: true });
  t.same(await a.closed, { code: 1011, reason: 'transcription_service_unavailable' }, 'the session on the dead thread closes 1011');
  t.match(await b.json((m) => m.status === 'stt_failed', 20_000), { provider: 'provider_a' });
  t.same(await b.closed, { code: 1011, reason: 'transcription_service_unavailable' }, 'so does the one that sent the poison');

  // What the provider never answered for is kept and streamed by the job: the device's samples from 0.95 s on.
  await until(() => fake.streams.some((s, i) => i > 1 && !s.open && s.bytes > 0), { what: 'the kept audio streamed by the job', timeoutMs: 30_000 });
  const job = fake.streams.find((s, i) => i > 1 && s.bytes > 0)!;
  const kept = new Int16Array(new Uint8Array(Buffer.concat(job.audio)).buffer);
  t.ok(kept.length > 0, 'audio was kept');
  t.same(kept, pcm.subarray(0.95 * 16_000, 0.95 * 16_000 + kept.length), 'the unanswered samples, in order');
  t.equal(kept.length, pcm.length - 0.95 * 16_000, 'every one of them, the batch in flight at the crash too');

  // The node is up and its new codec thread decodes.
  t.equal((await ts.req('/health')).status, 200);
  const c = await open(ts, { uid: 'u3', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const dgC = fake.streams.at(-1)!;
  send(c, 0, 16_000);
  await until(async () => {
    await advance(ts, 100);
    return dgC.bytes >= 32_000 - 3200;
  }, { what: 'a new session decoded on the new thread', timeoutMs: 15_000 });
  t.pass('a new session streams');
  c.close();
  await c.closed;
});
