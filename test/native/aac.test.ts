// The AAC addon (FFmpeg's decoder, LGPL build) matches the ffmpeg program sample for sample, mixes stereo down,
// survives corrupt frames and frees its state on close().
import t from 'tap';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { AacDecoder, AAC_MAX_FRAME_SAMPLES, AAC_NO_ROOM } from '../../native/aac.js';
import { aacAdts, concat, sine, speech } from '../helpers/codec-fixtures.js';

/** Decodes every frame with a fresh decoder, in order, into one array at the stream's rate. */
function decodeAll(frames: readonly Uint8Array[]): { pcm: Int16Array; rate: number; errors: number } {
  const dec = new AacDecoder();
  const out = new Int16Array(AAC_MAX_FRAME_SAMPLES);
  const chunks: Int16Array[] = [];
  let errors = 0;
  for (const f of frames) {
    const n = dec.decodeInto(f, out, 0);
    if (n < 0) errors++;
    else chunks.push(out.slice(0, n));
  }
  const rate = dec.sampleRate;
  dec.close();
  return { pcm: concat(chunks), rate, errors };
}

t.test('mono speech decodes to what the ffmpeg program gives, to the last bit but for float rounding', async (t) => {
  const dir = t.testdir();
  for (const rate of [16000, 44100]) {
    const frames = aacAdts(dir, speech(dir, rate), rate);
    const file = path.join(dir, `whole-${rate}.aac`);
    execFileSync('sh', ['-c', 'cat > "$0"', file], { input: Buffer.concat(frames) });
    const raw = execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'aac', '-i', file, '-f', 's16le', '-']);
    const reference = new Int16Array(raw.buffer, raw.byteOffset, raw.byteLength >> 1);
    const ours = decodeAll(frames);
    t.equal(ours.rate, rate, `${rate} Hz out`);
    t.equal(ours.errors, 0);
    t.equal(ours.pcm.length, reference.length, `${rate} Hz: ${frames.length} frames of 1024 samples`);
    // Debian's ffmpeg runs SIMD transforms, our build the C ones: a few samples round the other way.
    let differ = 0;
    let most = 0;
    ours.pcm.forEach((v, i) => {
      const d = Math.abs(v - reference[i]!);
      if (d > 0) differ++;
      most = Math.max(most, d);
    });
    t.ok(most <= 1 && differ <= reference.length / 1000, `${rate} Hz: ${differ} samples differ, by at most ${most}`);
  }
});

t.test('stereo is mixed down to one channel at the same level', async (t) => {
  const dir = t.testdir();
  const mono = decodeAll(aacAdts(dir, sine(440, 48000, 1, 8000), 48000, 1)).pcm;
  const stereo = decodeAll(aacAdts(dir, sine(440, 48000, 1, 8000), 48000, 2)).pcm;
  t.equal(stereo.length, mono.length);
  const rms = (a: Int16Array): number => Math.sqrt(a.subarray(4800, 43200).reduce((s, v) => s + v * v, 0) / 38400);
  t.ok(Math.abs(rms(stereo) - rms(mono)) < 0.05 * rms(mono), `RMS ${rms(stereo).toFixed(0)} and ${rms(mono).toFixed(0)}`);
});

t.test('a corrupt frame answers a negative code and the decoder goes on; no room is AAC_NO_ROOM', async (t) => {
  const dir = t.testdir();
  const frames = aacAdts(dir, sine(440, 16000, 1, 8000), 16000);
  const dec = new AacDecoder();
  const out = new Int16Array(AAC_MAX_FRAME_SAMPLES);
  t.equal(dec.decodeInto(frames[0]!, out, 0), 1024);
  t.ok(dec.decodeInto(frames[1]!.map((v, i) => (i < 7 ? v : 0)), out, 0) < 0, 'zeroed payload');
  t.ok(dec.decodeInto(new Uint8Array(0), out, 0) < 0, 'empty');
  t.equal(dec.decodeInto(frames[2]!, out, AAC_MAX_FRAME_SAMPLES - 100), AAC_NO_ROOM);
  t.equal(dec.decodeInto(frames[3]!, out, 0), 1024, 'still decoding');
  t.throws(() => dec.decodeInto(frames[4]!, new Int16Array(4) as never, 8), { code: 'ERR_AAC_ARGS' }, 'offset outside out');
  t.throws(() => dec.decodeInto('x' as never, out, 0), { code: 'ERR_AAC_ARGS' });
  dec.close();
  dec.close();
  t.throws(() => dec.decodeInto(frames[4]!, out, 0), { code: 'ERR_AAC_ARGS' }, 'closed');
});
