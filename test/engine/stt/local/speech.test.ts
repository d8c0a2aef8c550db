// The local engine (PocketSphinx on a speech thread): recognition, word times, silence, finalize and close, and what a
// gated session's audio costs in crossings.
import t from 'tap';
import { LocalEngine } from '../../../../engine/stt/local/speech.js';
import type { SttSegment } from '../../../../engine/stt/types.js';
import { chunks, concat, silence, speak } from '../../../helpers/speech.js';

const opts = (sessionId: string) => ({ language: 'en', sampleRateHz: 16000 as const, sessionId });

t.test('recognises a clear phrase with increasing word times inside the audio', async (t) => {
  const engine = new LocalEngine();
  t.teardown(() => engine.close());
  const speech = speak(t.testdir(), 'the weather is nice today');
  const pcm = concat(silence(0.5), speech, silence(0.5));
  const durationS = pcm.length / 16000;
  const stream = await engine.open(opts('s1'));
  const segments: SttSegment[] = [];
  stream.on('segments', (s) => segments.push(...s));
  const started = process.cpuUsage();
  const wall = performance.now();
  for (const c of chunks(pcm)) stream.write(c);
  await stream.finalize();
  const cpu = process.cpuUsage(started);
  const wallMs = performance.now() - wall;
  t.comment(`local engine: ${durationS.toFixed(2)} s audio in ${wallMs.toFixed(0)} ms wall (RTF ${(wallMs / 1000 / durationS).toFixed(3)}), process CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms`);
  t.equal(segments.length, 1, 'one utterance');
  const seg = segments[0]!;
  t.equal(seg.speaker, 'SPEAKER_00');
  const words = seg.words ?? [];
  t.comment(`heard: ${seg.text}`);
  const heard = new Set(words.map((w) => w.word));
  const expected = ['the', 'weather', 'is', 'nice', 'today'].filter((w) => heard.has(w));
  t.ok(expected.length >= 2, `at least two expected words recognised (${expected.join(', ')})`);
  let last = 0;
  for (const w of words) {
    t.ok(w.start >= last && w.end >= w.start, `${w.word} in order`);
    last = w.start;
  }
  t.ok(words[0]!.start >= 0.4, 'first word after the leading silence');
  t.ok(words[words.length - 1]!.end <= durationS, 'last word within the audio');
  t.equal(seg.start, words[0]!.start);
  await stream.close();
});

t.test('silence yields no segments; close is idempotent and the engine refuses other languages', async (t) => {
  const engine = new LocalEngine();
  t.teardown(() => engine.close());
  t.equal(engine.supports('en'), true);
  t.equal(engine.supports('de'), false);
  await t.rejects(engine.open({ ...opts('x'), language: 'de' }), { code: 'ENG_ERR_STT_LANGUAGE_UNSUPPORTED', reason: 'language_unsupported' });
  const stream = await engine.open(opts('s2'));
  const segments: SttSegment[] = [];
  stream.on('segments', (s) => segments.push(...s));
  for (const c of chunks(silence(2))) stream.write(c);
  await stream.finalize();
  t.same(segments, []);
  t.same(engine.load, [1]);
  await stream.close();
  await stream.close();
  t.same(engine.load, [0], 'decoder freed');
  stream.write(new Int16Array(160)); // ignored after close
  await stream.finalize();
});

t.test('finalize flushes each utterance; times count from the stream start', async (t) => {
  const engine = new LocalEngine();
  t.teardown(() => engine.close());
  const speech = speak(t.testdir(), 'please call me tomorrow');
  const stream = await engine.open(opts('s3'));
  const segments: SttSegment[] = [];
  stream.on('segments', (s) => segments.push(...s));
  stream.write(speech);
  await stream.finalize();
  t.equal(segments.length, 1, 'first utterance emitted by finalize');
  stream.write(silence(1));
  stream.write(speech);
  await stream.finalize();
  t.equal(segments.length, 2, 'second utterance emitted by finalize');
  const offsetS = speech.length / 16000 + 1;
  t.ok(segments[1]!.start >= offsetS, `second utterance starts after ${offsetS.toFixed(2)} s (${segments[1]!.start})`);
  t.ok(segments[1]!.end <= 2 * offsetS);
});

t.test('a gated session\'s audio crosses to its speech thread once, and only words come back', async (t) => {
  const engine = new LocalEngine({ gate: {} });
  t.teardown(() => engine.close());
  const pcm = concat(silence(2), speak(t.testdir(), 'the weather is nice today'), silence(2));
  const stream = await engine.open(opts('c1'));
  const segments: SttSegment[] = [];
  stream.on('segments', (s) => segments.push(...s));
  const before = engine.posted[0]!;
  const parts = chunks(pcm);
  for (const c of parts) stream.write(c);
  await stream.finalize();
  const after = engine.posted[0]!;
  t.equal(after.movedBytes - before.movedBytes, pcm.byteLength, 'every sample moved to the thread once, none twice');
  t.ok(after.tasks - before.tasks <= parts.length + 1, `one task per batch and the flush (${after.tasks - before.tasks} for ${parts.length} writes)`);
  t.same(engine.posted.length, 1, 'gate and recognizer share one thread');
  const gate = stream.gate!;
  t.equal(gate.inSamples, pcm.length, 'the gate saw all of it');
  t.ok(gate.passedSamples < pcm.length - 16000, 'the gate kept the silence from the recognizer');
  t.ok(segments.flatMap((s) => s.words ?? []).length > 0, 'and the recognizer heard the speech it passed');
  await stream.close();
});
