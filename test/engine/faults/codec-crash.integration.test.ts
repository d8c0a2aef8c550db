// A codec thread that dies mid-session: its provider sockets go with it, so every session on it reports stt_failed and
// closes 1011 once the audio its provider had not answered for is kept (then transcribed by the kept-audio job); the
// thread is replaced, the node stays up and takes new sessions. With the local engine the sessions go on, and the
// batch the thread took down is decoded again, in its place. The thread is ended by a frame the test worker treats
// as poison (test/helpers/crash-decode-worker.ts).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { CRASH_MESSAGE, CRASH_WORKER } from '../../helpers/crash-decode-worker.js';
import { concat, silence, speak } from '../../helpers/speech.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';
import { createLogger } from '../../../engine/logger.js';
import { LocalGatedEngine } from '../../../engine/stt/local/engine.js';
import type { SttEngine, SttStream, SttStreamOptions } from '../../../engine/stt/types.js';

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

/** The real local engine, with a copy of the PCM each of its streams is written, in order. */
class TappedLocal implements SttEngine {
  readonly name = 'local';
  inner: SttEngine | undefined;
  readonly written: Int16Array[][] = [];
  supports(language: string): boolean {
    return this.inner!.supports(language);
  }
  async open(opts: SttStreamOptions): Promise<SttStream> {
    const s = await this.inner!.open(opts);
    const chunks: Int16Array[] = [];
    this.written.push(chunks);
    const tapped: SttStream = {
      provider: s.provider,
      write: (pcm) => {
        chunks.push(pcm.slice());
        s.write(pcm);
      },
      finalize: () => s.finalize(),
      close: () => s.close(),
      on: (event, listener) => (s.on(event, listener), tapped),
      off: (event, listener) => (s.off(event, listener), tapped),
    };
    return tapped;
  }
  close(): Promise<void> {
    return this.inner!.close();
  }
}

t.test('with the local engine a codec thread crash loses nothing: the batch in flight is decoded again, in order', async (t) => {
  const local = new TappedLocal();
  const lines: { msg: string; sessionId?: string; messages?: number }[] = [];
  const logger = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const ts = await startService(t, { env: { CODEC_THREADS: '1', VAD_GATE: 'off' }, tuning: { inlineBusyPct: 0 }, codecWorker: CRASH_WORKER, sttEngines: [local], logger });
  local.inner = new LocalGatedEngine({ vadGate: false, scheduler: ts.service.scheduler, clock: ts.clock });
  const words = concat(speak(mkdtempSync(path.join(tmpdir(), 'crash-speech-')), 'The weather is nice today. Remember to call the dentist tomorrow morning.'), silence(1));
  const pcm = concat(words, new Int16Array(1600 - (words.length % 1600)));
  const a = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await a.ready();
  const b = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  await b.ready();
  const received = (): number => (local.written[0] ?? []).reduce((n, c) => n + c.length, 0);
  const send = (from: number, to: number): void => {
    for (let i = from; i < to; i += 1600) a.ws.send(new Uint8Array(pcm.buffer, i * 2, 3200).slice());
  };
  const half = Math.floor(pcm.length / 3200) * 1600;
  send(0, half);
  await until(() => received() === half, { what: 'the first half decoded', timeoutMs: 15_000 });
  // A second of the session's audio is on its way when the other session's poison ends the thread; the rest follows.
  send(half, half + 16_000);
  b.ws.send(CRASH_MESSAGE);
  send(half + 16_000, pcm.length);
  await until(async () => {
    await advance(ts, 100);
    return received() >= pcm.length;
  }, { what: 'every sample at the engine', timeoutMs: 20_000 }).catch(() => undefined);
  // The poison itself cannot be decoded again; the session's batch (more than one message) can.
  const hit = lines.find((l) => (l.msg === 'codec failed a batch: decoding it again' || l.msg === 'audio lost: the codec failed a batch') && (l.messages ?? 0) > 1);
  t.ok(hit, 'the crash took a batch of the session down with it');
  t.same(lines.filter((l) => l.sessionId === hit?.sessionId && l.msg.startsWith('audio lost')), [], 'none of its audio is reported lost');
  const got = concat(...local.written[0]!);
  t.equal(got.length, pcm.length, 'every sample reached the engine');
  t.ok(got.length === pcm.length && got.every((x, i) => x === pcm[i]), 'the same samples, in order');

  // The poison, decoded again, cannot be, and ends only the thread apart: the sessions' thread died once.
  await until(() => lines.some((l) => l.sessionId !== hit?.sessionId && l.msg === 'audio lost: a batch the codec lost was not decoded again'), { what: 'the poison tried again', timeoutMs: 15_000 });
  t.same(ts.service.codecPool!.crashes, [1], 'the sessions\' thread was not ended a second time');

  // Both sessions go on, and the transcript comes.
  t.notOk(a.frames.some((f) => f.includes('stt_failed')), 'no stt_failed');
  await until(async () => {
    await advance(ts, 600);
    return a.frames.some((f) => f.startsWith('[{'));
  }, { what: 'the transcript', timeoutMs: 30_000 });
  t.pass('segments come');
  a.close();
  b.close();
  t.same((await a.closed).code, 1000);
});
