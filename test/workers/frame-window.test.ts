// The window of an Opus session's packets kept in its codec thread for speaker identification: clips decoded from it
// match the PCM the stream decoded to (after a short warm-up), at a fraction of the PCM's memory; old batches go.
import t from 'tap';
import { FrameWindow, WARMUP_SAMPLES } from '../../workers/frame-window.js';
import { PcmWindow } from '../../workers/pcm-window.js';
import { createChannelDecoder } from '../../workers/channel-decoders.js';
import { OpusEncoderStream } from '../../native/opus.js';
import { speak } from '../helpers/speech.js';

const WINDOW = 20 * 16000;
const params = { codec: 'opus_fs320', sampleRate: 16000, channels: 1 } as const;

/** `seconds` of speech (a sentence over and over) as 20 ms Opus packets. */
function packetsOf(dir: string, seconds: number): Uint8Array[] {
  const sentence = speak(dir, 'Remind me to call the dentist tomorrow about the appointment on Friday.');
  const enc = new OpusEncoderStream(16000);
  const out: Uint8Array[] = [];
  for (let at = 0; out.length < seconds * 50; at = (at + 320) % (sentence.length - 320)) out.push(new Uint8Array(enc.encode(sentence.subarray(at, at + 320))));
  return out;
}

/** Signal to error ratio of `b` against `a`, dB. */
function snrDb(a: Int16Array, b: Int16Array): number {
  let s = 0;
  let e = 0;
  for (let i = 0; i < a.length; i++) {
    s += a[i]! * a[i]!;
    e += (a[i]! - b[i]!) ** 2;
  }
  return e === 0 ? Infinity : 10 * Math.log10(s / e);
}

t.test('clips decoded from the kept packets are the stream\'s PCM, in a fraction of the memory', async (t) => {
  const packets = packetsOf(t.testdir(), 45);
  const live = createChannelDecoder(params);
  const start = 3200; // the window opened after the stream's first 200 ms
  const frames = new FrameWindow(WINDOW, start, () => createChannelDecoder(params));
  const pcm = new PcmWindow(WINDOW, start);
  live.decode(packets.slice(0, 10));
  // Batches of 1 to 7 packets, as decode tasks take them.
  for (let i = 10, n = 1; i < packets.length; i += n, n = (n % 7) + 1) {
    const batch = packets.slice(i, i + n);
    const r = live.decode(batch);
    const samples = r.pcm.reduce((a, p) => a + p.length, 0);
    frames.append(batch, samples);
    for (const p of r.pcm) pcm.append(p);
  }
  t.equal(frames.end, pcm.end, 'the same stream positions');

  const end = frames.end;
  const ranges = [end - 8 * 16000, end - 5 * 16000, end - 3 * 16000 + 7, end - 16000];
  const want = pcm.read(ranges);
  const got = frames.read(ranges);
  t.equal(got.length, want.length, 'two spans, 5 s in all');
  t.ok(snrDb(want, got) > 50, `decoded again after a warm-up: ${snrDb(want, got).toFixed(1)} dB against the stream's PCM`);
  const oldest = frames.read([frames.start, frames.start + 16000]);
  t.equal(frames.start, pcm.start, 'the window\'s 20 s held');
  t.ok(snrDb(pcm.read([pcm.start, pcm.start + 16000]), oldest) > 50, 'its oldest second too, warmed up by packets kept before it');
  t.equal(frames.read([0, frames.start]).length, 0, 'audio older than the window adds nothing');
  t.equal(frames.read([end, end + 100]).length, 0, 'nor audio not yet decoded');
  t.ok(frames.bytes * 4 < pcm.bytes, `${frames.bytes} bytes held against ${pcm.bytes} for the PCM`);
  t.ok(WARMUP_SAMPLES > 0);
});

t.test('past its byte bound the window lets its oldest packets go, even within its seconds', async (t) => {
  const packets = packetsOf(t.testdir(), 10);
  const live = createChannelDecoder(params);
  const frames = new FrameWindow(WINDOW, 0, () => createChannelDecoder(params), 8000);
  for (let i = 0; i < packets.length; i += 5) {
    const batch = packets.slice(i, i + 5);
    frames.append(batch, live.decode(batch).pcm.reduce((a, p) => a + p.length, 0));
  }
  t.equal(frames.end, 10 * 16000);
  t.ok(frames.start > 0 && frames.start < frames.end, `the oldest went (held from ${frames.start})`);
  const all = frames.read([0, frames.end]);
  t.equal(all.length, frames.end - frames.start, 'what is held reads back whole');
  t.ok(frames.bytes < 64 * 1024, `${frames.bytes} bytes`);
});
