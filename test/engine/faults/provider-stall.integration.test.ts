// A speech provider that stops answering but keeps its socket open: the session notices once 20 s of audio went out
// with no message back (checked at each 4 s keep-alive period), reports stt_failed `provider_stalled`, closes 1011,
// and every sample the provider had not answered for is kept and transcribed later by the kept-audio job.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { startFakeDeepgram, type ConnectStep } from '../../fakes/deepgram-server.js';

t.test('a stalled provider is failed within 24 s of audio, and the unanswered audio is kept, every sample', async (t) => {
  const fake = await startFakeDeepgram({ recordAudio: true, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const live: ConnectStep = { kind: 'accept', results: [{ afterS: 0.95, words: [{ word: 'before', punctuated_word: 'Before.', speaker: 0, start: 0.2, end: 0.6 }] }] };
  fake.script(live, { kind: 'accept', results: [] });
  const ts = await startService(t, { env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' } });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  // Noise, not a tone, so a shifted tail cannot compare equal.
  const seconds = 40;
  const pcm = new Int16Array(seconds * 16_000);
  let seed = 11;
  for (let i = 0; i < pcm.length; i++) pcm[i] = ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) - 32768;
  const sendSecond = (s: number): void => {
    for (let i = s * 16_000; i < (s + 1) * 16_000; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, 3200).slice());
  };
  sendSecond(0);
  await until(async () => {
    await advance(ts, 100);
    return (fake.streams[0]?.resultsSent ?? 0) >= 1;
  }, { what: 'the first final result', timeoutMs: 15_000 });
  const dg = fake.streams[0]!;
  // From here the provider reads audio but holds every answer: the socket stays open.
  live.answerDelayMs = 3_600_000;
  let failedAtS = 0;
  const failed = c.json((m) => m.status === 'stt_failed', 120_000);
  for (let s = 1; s < seconds; s++) {
    sendSecond(s);
    // Each second reaches the provider before the clock moves past it: the stall counts periods that carried audio.
    await until(() => dg.bytes >= (s + 1) * 32_000 - 3200 || !dg.open, { what: `second ${s} at the provider`, timeoutMs: 15_000 });
    if (!dg.open) break;
    await advance(ts, 1000);
    failedAtS = s;
  }
  t.match(await failed, { type: 'service_status', status: 'stt_failed', outcome: 'upstream_error', provider: 'provider_a', retryable: true, reason: 'provider_stalled' });
  t.ok(failedAtS >= 20 && failedAtS <= 25, `noticed after ${failedAtS} s without an answer (bound: 20-24 s)`);
  t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });
  t.notOk(dg.open, 'the stalled socket was closed');
  const sentSamples = dg.bytes / 2;
  await until(() => fake.streams.length === 2 && !fake.streams[1]!.open, { what: 'the kept audio streamed by the job', timeoutMs: 30_000 });
  const kept = new Int16Array(new Uint8Array(Buffer.concat(fake.streams[1]!.audio)).buffer);
  t.ok(kept.length >= sentSamples - 0.95 * 16_000, 'every sample sent after the last answer is kept');
  t.same(kept, pcm.subarray(0.95 * 16_000, 0.95 * 16_000 + kept.length), 'the same samples, in order, from the last answer on');
  const metrics = (await ts.req('/metrics')).text;
  t.match(metrics, /stt_stream_failures_total\{provider="provider_a",reason="provider_stalled"\} 1/, 'the failure is counted by reason');
});
