// The local engine (PocketSphinx on a speech thread): recognition, word times, silence, finalize and close, and what a
// gated session's audio costs in crossings, and the end of an utterance when the audio stops.
import t from 'tap';
import { LocalEngine } from '../../../../engine/stt/local/speech.js';
import type { SttSegment } from '../../../../engine/stt/types.js';
import { chunks, concat, silence, speak } from '../../../helpers/speech.js';
import { until } from '../../../helpers/until.js';
import { ManualClock } from '../../../../engine/clock.js';
import { Scheduler } from '../../../../engine/scheduler.js';

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

t.test('a stream whose audio stops ends its utterance after idleEndMs of the injected clock, with one timer', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  const engine = new LocalEngine({ gate: {}, scheduler, clock });
  t.teardown(async () => {
    await engine.close();
    scheduler.close();
  });
  const speech = concat(silence(0.5), speak(t.testdir(), 'the weather is nice today'));
  const stream = await engine.open(opts('i1'));
  const segments: SttSegment[] = [];
  stream.on('segments', (s) => segments.push(...s));
  const tasks = (): number => engine.posted[0]!.tasks;
  const parts = chunks(speech, 600);
  // Audio every 600 ms of clock: the stream never goes a second without it, and keeps one timer.
  for (const c of parts) {
    stream.write(c);
    t.equal(scheduler.size, 1, 'one timer per stream, however many writes');
    clock.advance(600);
    await scheduler.tick();
  }
  await until(() => (stream.gate?.inSamples ?? 0) === speech.length, { what: 'the thread took the audio' });
  const audioTasks = tasks();
  t.same(segments, [], 'no pause, no idle second: the utterance is still open');
  // The last write was 600 ms of clock ago: 399 ms more are not yet a second.
  clock.advance(399);
  await scheduler.tick();
  t.equal(tasks(), audioTasks, 'no flush before a second without audio');
  clock.advance(1);
  await scheduler.tick();
  await until(() => segments.length > 0, { what: 'the words of the utterance the idle second ended' });
  t.equal(tasks(), audioTasks + 1, 'one flush task');
  t.ok(segments.flatMap((s) => s.words ?? []).some((w) => ['the', 'weather', 'is', 'nice', 'today'].includes(w.word)), `heard: ${segments.map((s) => s.text).join(' ')}`);
  t.equal(scheduler.size, 0, 'no timer while no audio comes');
  clock.advance(5000);
  await scheduler.tick();
  t.equal(tasks(), audioTasks + 1, 'one flush per stop, not one per second of quiet');
  await stream.close();
});
