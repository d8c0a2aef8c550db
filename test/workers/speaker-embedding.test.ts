// The built-in speaker embedding on real speech: espeak-ng voices saying a few sentences each, resampled to 16 kHz
// mono; one voice also sped up with sox (still that speaker) and pitched down (a speaker of its own). Synthetic voices
// are more regular than people, so the error rate here is a floor on what real voices give, not an estimate of it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { DspSpeakerEmbedder, cosineSimilarity } from '../../workers/speaker-embedding.js';
import { FeatureExtractor, SAMPLE_RATE, melCentres } from '../../workers/speaker-features.js';

const SENTENCES = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'I would like to schedule a meeting for tomorrow afternoon at three.',
  'Please remember to buy milk, bread and some fresh vegetables today.',
  'The weather has been unusually warm for this time of the year.',
  'We talked about the project budget and the new hiring plan.',
];
/** Who speaks, with which espeak-ng voice, and the sox effects applied after resampling. */
const RECORDINGS = [
  { speaker: 'm3', voice: 'en-us+m3', effects: [] },
  { speaker: 'm3', voice: 'en-us+m3', effects: ['tempo', '1.25'] },
  { speaker: 'f2', voice: 'en-us+f2', effects: [] },
  { speaker: 'm7', voice: 'en-us+m7', effects: [] },
  { speaker: 'f4', voice: 'en-us+f4', effects: [] },
  { speaker: 'gb', voice: 'en-gb+m1', effects: [] },
  { speaker: 'klatt', voice: 'en-us+klatt', effects: [] },
  { speaker: 'm3-low', voice: 'en-us+m3', effects: ['pitch', '-400'] },
];

function speak(dir: string, voice: string, effects: string[], text: string, name: string): Int16Array {
  const wav = join(dir, `${name}.wav`);
  const raw = join(dir, `${name}.raw`);
  execFileSync('espeak-ng', ['-v', voice, '-w', wav, text]);
  execFileSync('sox', [wav, '-r', String(SAMPLE_RATE), '-c', '1', '-b', '16', '-e', 'signed-integer', '-t', 'raw', raw, ...effects]);
  const bytes = readFileSync(raw);
  return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length >> 1);
}

/** The lowest max(false rejects, false accepts) over every threshold, and the threshold giving it. */
function equalErrorRate(same: number[], different: number[]): { rate: number; threshold: number } {
  let best = { rate: 1, threshold: 0 };
  for (const threshold of [...same, ...different]) {
    const rejects = same.filter((s) => s < threshold).length / same.length;
    const accepts = different.filter((d) => d >= threshold).length / different.length;
    const rate = Math.max(rejects, accepts);
    if (rate < best.rate) best = { rate, threshold };
  }
  return best;
}

const tone = (hz: number, seconds: number, amplitude = 0.3): Float32Array => {
  const out = new Float32Array(Math.round(seconds * SAMPLE_RATE));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * hz * i) / SAMPLE_RATE);
  return out;
};

t.test('a 1 kHz tone puts its energy in the mel band centred nearest 1 kHz', async (t) => {
  const mel = new FeatureExtractor().logMel(tone(1000, 0.5));
  t.equal(mel.frames, 1 + Math.floor((SAMPLE_RATE / 2 - 400) / 160));
  const centres = melCentres();
  const nearest = centres.reduce((best, hz, b) => (Math.abs(hz - 1000) < Math.abs(centres[best]! - 1000) ? b : best), 0);
  const frame = mel.values.subarray(10 * mel.bands, 11 * mel.bands);
  const loudest = frame.indexOf(Math.max(...frame));
  t.ok(Math.abs(loudest - nearest) <= 1, `loudest band ${loudest}, nearest to 1 kHz ${nearest}`);
  t.ok(frame[loudest]! - frame[mel.bands - 1]! > 10, 'the top band is far quieter');
});

t.test('an embedding is unit length, deterministic, the same from Int16 and Float32, and zero for silence', async (t) => {
  const embedder = new DspSpeakerEmbedder();
  const dir = mkdtempSync(join(tmpdir(), 'speaker-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pcm = speak(dir, 'en-us', [], SENTENCES[0]!, 'one');
  const a = embedder.embed(pcm);
  t.equal(a.length, embedder.dimension);
  t.ok(Math.abs(Math.hypot(...a) - 1) < 1e-5, 'unit length');
  t.same(embedder.embed(pcm), a, 'the same audio gives the same vector');
  const float = Float32Array.from(pcm, (s) => s / 32768);
  t.ok(cosineSimilarity(embedder.embed(float), a) > 0.99999, 'Int16 and Float32 agree');
  const quiet = Int16Array.from(pcm, (s) => Math.round(s / 8));
  t.ok(cosineSimilarity(embedder.embed(quiet), a) > 0.999, 'loudness does not move the vector');
  const silence = embedder.embed(new Int16Array(SAMPLE_RATE));
  t.equal(Math.hypot(...silence), 0);
  t.equal(Math.hypot(...embedder.embed(new Int16Array(100))), 0, 'audio shorter than a frame embeds to zeros');
  t.equal(cosineSimilarity(silence, a), 0);
  t.throws(() => cosineSimilarity(a, new Float32Array(3)), RangeError);
});

t.test('synthetic voices are told apart: equal-error rate under 8% over 780 pairs (real voices do worse)', async (t) => {
  const embedder = new DspSpeakerEmbedder();
  const dir = mkdtempSync(join(tmpdir(), 'speaker-eer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const audio: { speaker: string; pcm: Int16Array }[] = [];
  RECORDINGS.forEach(({ speaker, voice, effects }, r) => {
    SENTENCES.forEach((text, i) => audio.push({ speaker, pcm: speak(dir, voice, effects, text, `${r}-${i}`) }));
  });
  const started = process.cpuUsage();
  const items = audio.map(({ speaker, pcm }) => ({ speaker, vector: embedder.embed(pcm) }));
  const cpu = process.cpuUsage(started);
  const seconds = audio.reduce((sum, { pcm }) => sum + pcm.length, 0) / SAMPLE_RATE;
  t.comment(`${((cpu.user + cpu.system) / seconds).toFixed(0)} µs CPU per second of audio (${seconds.toFixed(0)} s, one pass)`);
  const same: number[] = [];
  const different: number[] = [];
  for (let i = 0; i < items.length; i++) {
    for (let j = i + 1; j < items.length; j++) {
      const score = cosineSimilarity(items[i]!.vector, items[j]!.vector);
      (items[i]!.speaker === items[j]!.speaker ? same : different).push(score);
    }
  }
  t.equal(same.length + different.length, 780);
  const { rate, threshold } = equalErrorRate(same, different);
  t.comment(`EER ${(rate * 100).toFixed(1)}% at cosine ${threshold.toFixed(3)}; ${same.length} same, ${different.length} different`);
  t.ok(rate < 0.08, `EER ${rate}`);
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  t.ok(mean(same) - mean(different) > 0.25, 'same-voice pairs score well above different-voice pairs on average');
});
