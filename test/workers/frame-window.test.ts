// The window of an Opus session's packets kept in its codec thread for speaker identification: clips decoded from it
// match the PCM the stream decoded to (after a short warm-up), at a fraction of the PCM's memory; old batches go;
// packets lie across pooled chunks of one size that windows give back and take again.
import t from 'tap';
import { CHUNK_BYTES, FrameWindow, WARMUP_SAMPLES, pooledChunks } from '../../workers/frame-window.js';
import { PcmWindow } from '../../workers/pcm-window.js';
import { createChannelDecoder, type ChannelDecoder } from '../../workers/channel-decoders.js';
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

/** A decoder whose every packet decodes to one sample per byte, the byte's value: the bytes read back show as PCM. */
const byteDecoder = (): ChannelDecoder => ({
  decode: (messages) => ({ pcm: messages.map((m) => Int16Array.from(m)), frames: messages.length, corruptFrames: 0 }),
  end: () => new Int16Array(0),
  dispose: () => undefined,
});

t.test('packets lie across pooled chunks, whatever their sizes, and read back whole; chunks are reused', async (t) => {
  // Packets of uneven sizes, one of them longer than a chunk, each filled with its own byte.
  const sizes = Array.from({ length: 400 }, (_, i) => (i === 150 ? CHUNK_BYTES + 333 : 40 + ((i * 37) % 260)));
  const packets = sizes.map((n, i) => new Uint8Array(n).fill(i % 251));
  const total = sizes.reduce((a, b) => a + b, 0);
  const frames = new FrameWindow(total + WARMUP_SAMPLES, 0, byteDecoder, Infinity);
  const pooled = pooledChunks();
  for (let i = 0; i < packets.length; i += 3) {
    const batch = packets.slice(i, i + 3);
    frames.append(batch, batch.reduce((a, p) => a + p.length, 0));
  }
  const all = frames.read([0, total]);
  t.equal(all.length, total);
  let at = 0;
  const wrong = packets.findIndex((p, i) => {
    const ok = all.subarray(at, at + p.length).every((v) => v === i % 251);
    at += p.length;
    return !ok;
  });
  t.equal(wrong, -1, 'every packet read back as written, across chunk boundaries and the long one');
  const spans = frames.read([1000, 2000, total - 500, total - 100]);
  t.same([spans.length, spans[0], spans[1000]], [1400, all[1000], all[total - 500]], 'spans inside the run');
  t.ok(frames.bytes < total + 2 * CHUNK_BYTES + 8192, `${frames.bytes} bytes held for ${total} bytes of packets`);

  // A window that slides gives its oldest chunks back; one started after takes them instead of allocating.
  const sliding = new FrameWindow(CHUNK_BYTES, 0, byteDecoder, Infinity);
  for (const p of packets) sliding.append([p], p.length);
  t.ok(pooledChunks() > pooled, `the sliding window gave chunks back (${pooledChunks() - pooled})`);
  const before = pooledChunks();
  const next = new FrameWindow(20 * 16000, 0, byteDecoder);
  next.append(packets.slice(0, 20), packets.slice(0, 20).reduce((a, p) => a + p.length, 0));
  t.equal(pooledChunks(), before - 1, 'a new window takes a pooled chunk');
  t.ok(sliding.read([sliding.start, sliding.end]).length > 0, 'what the sliding window holds still reads');
  frames.dispose();
  next.dispose();
  t.ok(pooledChunks() >= before, 'disposed windows give their chunks back');
  t.equal(frames.read([0, total]).length, 0, 'a disposed window holds nothing');
});
