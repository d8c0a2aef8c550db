// The speech gate (workers/speech-gate.ts, on the speech thread): Silero VAD finds speech, the gate passes speech and
// drops silence, the recognizer's times are remapped to the stream's.
import t from 'tap';
import { LocalEngine } from '../../../../engine/stt/local/speech.js';
import type { SttSegment } from '../../../../engine/stt/types.js';
import { SileroVad, VAD_STATE_FLOATS } from '../../../../native/silero-vad.js';
import { GatedRecognizer, SpeechGate, TimeMap, type GateAction } from '../../../../workers/speech-gate.js';
import type { LocalSegment } from '../../../../workers/speech-messages.js';
import type { Recognizer } from '../../../../workers/speech-recognizer.js';
import { chunks, concat, silence, speak } from '../../../helpers/speech.js';

/** First and last sample louder than the noise floor, in seconds: where the speech really is. */
function speechBounds(pcm: Int16Array): [number, number] {
  let first = -1;
  let last = -1;
  for (let i = 0; i < pcm.length; i++) {
    if (Math.abs(pcm[i]!) > 600) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return [first / 16000, last / 16000];
}

/** A recognizer that keeps what it gets and, on finalize, reports one segment spanning the audio of that region. */
class RecordingRecognizer implements Recognizer {
  readonly audio: Int16Array[] = [];
  samples = 0;
  regionStart = 0;
  freed = false;
  write(pcm: Int16Array): void {
    this.audio.push(pcm.slice());
    this.samples += pcm.length;
  }
  finalize(out: LocalSegment[]): void {
    if (this.samples > this.regionStart) out.push({ text: 'x', start: this.regionStart / 16000, end: this.samples / 16000, words: [] });
    this.regionStart = this.samples;
  }
  free(): void {
    this.freed = true;
  }
}

const newState = () => ({ h: new Float32Array(VAD_STATE_FLOATS), c: new Float32Array(VAD_STATE_FLOATS) });

t.test('SpeechGate: pre-roll before speech, hang-over after it', async (t) => {
  const gate = new SpeechGate({ preRollMs: 64, hangoverMs: 96 });
  const w = new Int16Array(512);
  const probs = [0, 0, 0, 0.9, 0.9, 0.1, 0.1, 0.1, 0, 0];
  const out: GateAction[] = [];
  probs.forEach((p, i) => gate.window(w, i * 512, p, out));
  t.same(
    out.map((a) => (a.kind === 'pass' ? a.streamSample / 512 : 'end')),
    [1, 2, 3, 4, 5, 6, 7, 'end'],
  );
});

t.test('TimeMap: inner times map back across dropped silence', async (t) => {
  const m = new TimeMap();
  m.passed(16000, 8000); // 1.0–1.5 s of the stream is inner 0–0.5 s
  m.passed(64000, 16000); // 4.0–5.0 s is inner 0.5–1.5 s
  t.equal(m.toStream(0.25), 1.25);
  t.equal(m.toStream(0.5), 4);
  t.equal(m.toStream(1.0), 4.5);
});

t.test('Silero VAD finds the speech in the middle of a file within 200 ms', async (t) => {
  const vad = await SileroVad.load();
  const speech = speak(t.testdir(), 'the weather is nice today');
  const pcm = concat(silence(1), speech, silence(1.5));
  const [s0, s1] = speechBounds(speech);
  const state = newState();
  const probs = await vad.run(pcm, state.h, state.c);
  const speechWindows = [...probs.keys()].filter((i) => probs[i]! >= 0.5);
  t.ok(speechWindows.length > 0, 'some speech found');
  const found0 = (speechWindows[0]! * 512) / 16000;
  const found1 = ((speechWindows[speechWindows.length - 1]! + 1) * 512) / 16000;
  t.comment(`speech really ${(1 + s0).toFixed(2)}–${(1 + s1).toFixed(2)} s, VAD ${found0.toFixed(2)}–${found1.toFixed(2)} s`);
  t.ok(Math.abs(found0 - (1 + s0)) <= 0.2, 'start within 200 ms');
  t.ok(Math.abs(found1 - (1 + s1)) <= 0.2, 'end within 200 ms');
  t.ok(probs.slice(0, 25).every((p) => p < 0.5), 'leading silence is not speech');
});

t.test('the gate passes speech, drops long silence and remaps times to the stream', async (t) => {
  const vad = await SileroVad.load();
  const speech = speak(t.testdir(), 'please call me tomorrow');
  const [s0, s1] = speechBounds(speech);
  const pcm = concat(silence(3), speech, silence(3));
  const inner = new RecordingRecognizer();
  const gated = new GatedRecognizer(inner, (p, h, c) => vad.run(p, h, c));
  const segments: LocalSegment[] = [];
  for (const c of chunks(pcm)) await gated.write(c, segments);
  gated.finalize(segments);
  const speechS = s1 - s0;
  const passedS = gated.stats.passedSamples / 16000;
  t.comment(`passed ${passedS.toFixed(2)} s of ${(pcm.length / 16000).toFixed(2)} s (speech ${speechS.toFixed(2)} s)`);
  t.equal(gated.stats.inSamples, pcm.length);
  t.ok(passedS >= speechS, 'all the speech passed');
  t.ok(passedS <= speechS + 0.3 + 1.0 + 0.2, 'silence beyond pre-roll and hang-over dropped');
  t.equal(inner.samples, gated.stats.passedSamples, 'the recognizer got exactly what the gate passed');
  t.equal(gated.stats.regions, 1, 'one speech region ended by the hang-over');
  t.equal(segments.length, 1);
  const seg = segments[0]!;
  const from = Math.round(seg.start * 16000);
  const got = concat(...inner.audio);
  t.ok(got.every((v, k) => v === pcm[from + k]), 'what it got is the stream from where the segment starts, unchanged');
  t.ok(Math.abs(seg.start - (3 + s0 - 0.3)) <= 0.2, `segment starts at the pre-roll before the speech (${seg.start})`);
  t.ok(seg.end >= 3 + s1 && seg.end <= 3 + s1 + 1.0, `segment ends in the hang-over after the speech (${seg.end})`);
  gated.free();
  t.ok(inner.freed, 'freeing the gate frees the recognizer');
});

t.test('gated local engine: words land where the speech really is', async (t) => {
  const engine = new LocalEngine({ gate: {} });
  t.teardown(() => engine.close());
  const speech = speak(t.testdir(), 'the weather is nice today');
  const [s0, s1] = speechBounds(speech);
  const pcm = concat(silence(2.5), speech, silence(2));
  const gated = await engine.open({ language: 'en', sampleRateHz: 16000, sessionId: 'g1' });
  t.equal(gated.provider, 'local');
  const segments: SttSegment[] = [];
  gated.on('segments', (s) => segments.push(...s));
  for (const c of chunks(pcm)) gated.write(c);
  await gated.finalize();
  const words = segments.flatMap((s) => s.words ?? []);
  t.comment(`heard: ${segments.map((s) => s.text).join(' | ')}; words ${words.map((w) => `${w.word}@${w.start}`).join(' ')}`);
  t.ok(words.length > 0, 'words recognised');
  t.ok(words[0]!.start >= 2.5 + s0 - 0.2, 'first word not before the speech');
  t.ok(words[words.length - 1]!.end <= 2.5 + s1 + 0.3, 'last word not after the speech');
  await gated.close();
});
