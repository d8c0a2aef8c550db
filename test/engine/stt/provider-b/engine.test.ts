// The provider_b engine against the fake Soniox server over real sockets: config, segments, keepalive, finalize, close.
import { until } from '../../../helpers/until.js';
import t from 'tap';
import { SttOpenError } from '../../../../engine/stt/types.js';
import { FAKE_SONIOX_KEY } from '../../../fakes/soniox-server.js';
import { collect, feed, openOpts, ramp, rig } from '../../../helpers/provider-b.js';

t.test('the config frame and the upgrade carry what the provider needs; languages follow its list', async (t) => {
  const { fake, engine } = await rig(t);
  const s1 = await engine.open(openOpts('s1', 'en-US'));
  const s2 = await engine.open(openOpts('s2', 'multi'));
  await until(() => fake.sessions.length === 2 && fake.sessions.every((s) => s.config !== undefined));
  t.same(fake.sessions[0]!.config, {
    api_key: FAKE_SONIOX_KEY,
    model: 'stt-rt-v5',
    audio_format: 'pcm_s16le',
    sample_rate: 16000,
    num_channels: 1,
    enable_speaker_diarization: true,
    enable_language_identification: true,
    enable_endpoint_detection: true,
    language_hints: ['en'],
  });
  t.equal(fake.sessions[0]!.authorization, `Bearer ${FAKE_SONIOX_KEY}`, 'key also sent with the connection');
  t.equal(fake.sessions[1]!.config!.language_hints, undefined, 'multi sends no hint');
  t.equal(fake.sessions[0]!.error, undefined, 'the fake accepted the start request');
  t.equal(s1.provider, 'provider_b');
  for (const lang of ['en', 'de-DE', 'pt_BR', 'zh', 'cy', 'multi']) t.ok(engine.supports(lang), lang);
  for (const lang of ['xx', 'tlh', 'yue']) t.notOk(engine.supports(lang), lang);
  await t.rejects(engine.open(openOpts('s3', 'tlh')), { name: 'SttOpenError', failure: { reason: 'language_unsupported', outcome: 'config_error', retryable: false } });
  await Promise.all([s1.close(), s2.close()]);
});

t.test('final tokens become segments with speakers from 1 → SPEAKER_00, cut on speaker change, 3 s gap and <end>', async (t) => {
  const { fake, engine, logs } = await rig(t);
  fake.script({
    tokens: [
      { text: 'Hello', start_ms: 0, end_ms: 400, speaker: 1 },
      { text: ' there', start_ms: 400, end_ms: 800, speaker: 1 },
      { text: '.', start_ms: 800, end_ms: 850, speaker: 1 },
      { text: 'Hi', start_ms: 1000, end_ms: 1300, speaker: 2 },
      { text: ' again', start_ms: 4500, end_ms: 4900, speaker: 2 },
      { text: '<end>', start_ms: 5000, end_ms: 5000 },
      { text: 'By', start_ms: 5200, end_ms: 5400, speaker: 1 },
      { text: 'e', start_ms: 5400, end_ms: 5500, speaker: 1 },
    ],
  });
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  feed(stream, 3000);
  await until(() => got.segments.length === 1, { what: 'the first segment' });
  t.same(got.segments, [
    { text: 'Hello there.', speaker: 'SPEAKER_00', start: 0, end: 0.85, words: [{ word: 'Hello', start: 0, end: 0.4 }, { word: 'there.', start: 0.4, end: 0.85 }] },
  ], 'cut when the other speaker\'s first word turned final');
  feed(stream, 3000, 3000 * 16);
  await until(() => got.segments.length === 3, { what: 'the gap and endpoint cuts' });
  t.same(got.segments.slice(1), [
    { text: 'Hi', speaker: 'SPEAKER_01', start: 1, end: 1.3, words: [{ word: 'Hi', start: 1, end: 1.3 }] },
    { text: 'again', speaker: 'SPEAKER_01', start: 4.5, end: 4.9, words: [{ word: 'again', start: 4.5, end: 4.9 }] },
  ], 'same speaker cut by a 3.2 s gap, then by the <end> endpoint');
  await stream.close();
  t.same(got.segments.slice(3), [{ text: 'Bye', speaker: 'SPEAKER_00', start: 5.2, end: 5.5, words: [{ word: 'Bye', start: 5.2, end: 5.5 }] }], 'pieces of one word stay one word; end of audio flushes');
  t.ok(fake.sessions[0]!.answers.some((a) => (a.tokens as { is_final: boolean }[]).some((tk) => !tk.is_final)), 'the fake also sent non-final tokens');
  t.equal(got.segments.length, 4, 'non-final tokens never became segments');
  t.same(got.failures, []);
  const text = logs.join('\n');
  for (const secret of [FAKE_SONIOX_KEY, 'Hello', 'again', 'Bye']) t.notOk(text.includes(secret), `logs do not contain ${secret}`);
  t.ok(text.includes('stt provider stream opened'));
});

t.test('keepalive during a 12 s pause keeps the stream, and a 45 s pause too; one scheduler entry per stream', async (t) => {
  const { fake, engine, scheduler, clock, advance } = await rig(t);
  const t0 = clock.now();
  /** One second later, with the socket given a moment to deliver what the tick sent. */
  const step = async (): Promise<void> => {
    await advance(1000);
    await new Promise((r) => setImmediate(r));
  };
  fake.script({ tokens: [{ text: 'before', start_ms: 0, end_ms: 500 }, { text: ' after', start_ms: 1200, end_ms: 1600 }] });
  const entriesBefore = scheduler.size;
  const stream = await engine.open(openOpts());
  t.equal(scheduler.size, entriesBefore + 1, 'the stream holds one scheduler entry');
  const got = collect(stream);
  let at = feed(stream, 1000);
  const rec = () => fake.sessions[0]!;
  await until(() => rec().audioBytes === 32000);
  for (let s = 1; s <= 12; s++) await step();
  await until(() => rec().keepalives.length >= 1);
  t.equal(rec().keepalives.length, 1, 'one keepalive in the 12 s pause');
  t.ok(rec().keepalives[0]! - t0 >= 10000 && rec().keepalives[0]! - t0 < 15000, 'sent 10 to 15 s after the last audio');
  at = feed(stream, 2000, at);
  for (let s = 1; s <= 45; s++) await step();
  await until(() => rec().keepalives.length >= 5);
  t.equal(rec().keepalives.length, 5, 'four more in the 45 s pause, 10 s apart');
  const gaps = rec().keepalives.slice(1).map((k, i) => k - (i === 0 ? t0 + 12000 : rec().keepalives[i]!));
  t.ok(gaps[0]! >= 10000 && gaps[0]! < 16000, 'the first 10 to 15 s after the audio');
  t.ok(gaps.slice(1).every((g) => g >= 10000 && g <= 11000), `then every 10 s (${gaps.join(', ')})`);
  t.equal(rec().error, undefined, 'the fake never closed the stream for idleness');
  feed(stream, 500, at);
  await stream.close();
  t.same(got.segments.map((s) => s.text), ['before after'], 'words on both sides of the pauses');
  t.same(got.failures, []);
  t.equal(scheduler.size, entriesBefore, 'the entry is gone after close');
});

t.test('finalize flushes the last words and resolves on <fin>; it is bounded when the provider stalls', async (t) => {
  const { fake, engine, advance } = await rig(t);
  fake.script({ tokens: [{ text: 'Good', start_ms: 0, end_ms: 300 }, { text: ' night', start_ms: 300, end_ms: 700 }], finalLagMs: 5000 }, { stall: true });
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  feed(stream, 1000);
  await until(() => fake.sessions[0]!.audioBytes === 32000);
  t.same(got.segments, [], 'nothing final yet');
  await stream.finalize();
  t.same(got.segments.map((s) => s.text), ['Good night'], 'finalize resolved after the words were emitted');
  t.equal(fake.sessions[0]!.finalizes, 1);
  await stream.close();

  const stalled = await engine.open(openOpts('s2'));
  feed(stalled, 500);
  let done = false;
  const finalizing = stalled.finalize().then(() => (done = true));
  await until(() => fake.sessions[1]!.finalizes === 1);
  await advance(4900);
  t.notOk(done, 'still waiting for <fin>');
  await advance(100);
  await finalizing;
  t.ok(done, 'gave up after finalizeTimeoutMs');
  let closed = false;
  const closing = stalled.close().then(() => (closed = true));
  await until(() => fake.sessions[1]!.endOfAudio !== undefined);
  await advance(10000);
  await closing;
  t.ok(closed, 'close gave up waiting for finished after finishTimeoutMs');
  t.equal(stalled.acknowledgedSamples!(), 0, 'what the provider never finalized is not acknowledged');
});

t.test('close ends the audio with an empty frame, flushes, is idempotent, and ignores later writes', async (t) => {
  const { fake, engine } = await rig(t);
  fake.script({ tokens: [{ text: 'Last', start_ms: 0, end_ms: 300 }, { text: ' words', start_ms: 300, end_ms: 700 }], finalLagMs: 5000, delayMs: 20 });
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  feed(stream, 1000);
  const first = stream.close();
  const second = stream.close();
  t.equal(first, second, 'one close in flight');
  await first;
  const rec = fake.sessions[0]!;
  t.equal(rec.endOfAudio, 'text');
  t.equal(rec.audioBytes, 32000);
  t.same(got.segments.map((s) => s.text), ['Last words'], 'slow answers still flushed before close resolved');
  t.equal(stream.acknowledgedSamples!(), 16000, 'everything acknowledged');
  stream.write(new Int16Array(1600));
  await stream.close();
  await stream.finalize();
  await until(() => rec.closed);
  t.equal(rec.audioBytes, 32000, 'nothing sent after close');
  t.equal(got.segments.length, 1);
  t.same(got.failures, []);
});

t.test('the config frame goes first, then each write as one message; one under 20 ms waits for finalize', async (t) => {
  const { fake, engine } = await rig(t);
  const stream = await engine.open(openOpts());
  const at = feed(stream, 1000, 0, 20);
  stream.write(ramp(10, at));
  await until(() => fake.sessions[0]?.audio.length === 50);
  t.ok(fake.sessions[0]!.config !== undefined, 'the config came before the audio');
  t.same(fake.sessions[0]!.audio.map((b) => b.length), new Array(50).fill(640), 'fifty 20 ms messages; the 10 ms rest waits');
  await stream.finalize();
  t.equal(fake.sessions[0]!.audio.at(-1)!.length, 320, 'finalize sent the rest first');
  await stream.close();
});

t.test('an open engine refuses after close()', async (t) => {
  const { engine } = await rig(t);
  await engine.close();
  const err = await engine.open(openOpts()).catch((e: unknown) => e);
  t.type(err, SttOpenError);
  t.equal((err as SttOpenError).failure.reason, 'initialization_failed');
});
