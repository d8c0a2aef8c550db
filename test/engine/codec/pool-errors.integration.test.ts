// Corrupt frames are counted and skipped, two channels stay apart, unsupported formats are refused, crashes heal.
import t from 'tap';
import { CodecPool } from '../../../engine/codec/pool.js';
import { isEngineError } from '../../../engine/errors.js';
import { Lc3Encoder } from '../../../native/index.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { aacAdts, drive, frames, onChannel, pcmMessages, sine, speech, tone } from '../../helpers/codec-fixtures.js';
import { CRASH_WORKER, crashShardOf } from '../../helpers/crash-decode-worker.js';

const pool = new CodecPool({ threads: 2 });
t.teardown(() => pool.close());
const dir = t.testdir();

const garbage = (n: number, seed: number): Uint8Array => new Uint8Array(n).map((_, i) => (i * 37 + seed * 101) & 0xff);

t.test('unsupported codec, sample rate or channels are refused with ENG_ERR_CODEC_UNSUPPORTED', async (t) => {
  const bad = [
    { codec: 'mp3', sampleRate: 16000, channels: 1 },
    { codec: 'opus', sampleRate: 44100, channels: 1 },
    { codec: 'lc3_fs1030', sampleRate: 44100, channels: 1 },
    { codec: 'pcm16', sampleRate: 16000, channels: 3 },
    { codec: 'pcm16', sampleRate: 7000, channels: 1 },
  ];
  for (const b of bad) {
    t.throws(() => pool.open({ sessionId: 'x', ...(b as object) } as never), { code: 'ENG_ERR_CODEC_UNSUPPORTED', status: 400 }, JSON.stringify(b));
  }
  t.same(pool.load, [0, 0], 'nothing was opened');
});

t.test('opus: corrupt packets are counted, concealed, and the session goes on', async (t) => {
  const pcm = sine(440, 16000, 1, 8000);
  const enc = new OpusEncoderStream(16000);
  const messages = frames(pcm, 160).map((f) => enc.encode(f));
  messages.splice(30, 0, garbage(40, 1));
  messages.splice(60, 0, garbage(3, 2));
  const stream = pool.open({ sessionId: 'opus-corrupt', codec: 'opus', sampleRate: 16000, channels: 1 });
  const out = await drive(stream, messages, 5);
  t.equal(stream.stats.corruptFrames, 2);
  // 100 good frames plus 2 concealed ones.
  t.equal(out[0]!.length, 102 * 160);
  t.ok(Math.abs(tone(out[0]!.subarray(16000 - 3200), 16000).hz - 440) < 10, 'still decoding the tone after the bad frames');
});

t.test('opus: packets longer than the nominal frame (40 and 60 ms in an opus_fs320 stream) decode whole, in any batch', async (t) => {
  const pcm = sine(440, 16000, 1, 8000);
  const enc = new OpusEncoderStream(16000);
  // 20 ms packets with runs of 60 ms and 40 ms ones between them: 1 s of audio either way.
  const sizes = [320, 960, 320, 640, 320, 960, 960, 320];
  const messages: Uint8Array[] = [];
  for (let at = 0, i = 0; at < pcm.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, pcm.length - at);
    messages.push(enc.encode(pcm.subarray(at, at + n)));
    at += n;
  }
  for (const batch of [1, 4, Infinity]) {
    const stream = pool.open({ sessionId: `opus-long-${batch}`, codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
    const out = await drive(stream, messages, batch);
    t.equal(stream.stats.corruptFrames, 0, `batches of ${batch}: nothing corrupt`);
    t.equal(out[0]!.length, pcm.length, `batches of ${batch}: every sample`);
    t.ok(Math.abs(tone(out[0]!.subarray(8000), 16000).hz - 440) < 10, `batches of ${batch}: the tone`);
  }
});

t.test('lc3_fs1030: corrupt and ragged frames are counted and the session goes on', async (t) => {
  const enc = new Lc3Encoder(10000, 16000);
  const good = frames(sine(440, 16000, 1, 8000), 160).map((f) => enc.encode(f, 30));
  const messages: Uint8Array[] = [...good.slice(0, 40), garbage(30, 3), new Uint8Array(45), ...good.slice(40)];
  const stream = pool.open({ sessionId: 'lc3-corrupt', codec: 'lc3_fs1030', sampleRate: 16000, channels: 1 });
  const out = await drive(stream, messages, 4);
  // The garbage frame is concealed (liblc3 PLC); the 45-byte message is one 30-byte frame plus a ragged 15.
  t.ok(stream.stats.corruptFrames >= 2, `corrupt ${stream.stats.corruptFrames}`);
  t.ok(Math.abs(tone(out[0]!.subarray(out[0]!.length - 3200), 16000).hz - 440) < 10, 'still decoding after');
});

t.test('aac: a message that is not ADTS is counted and skipped; the rest decodes as if it had not come', async (t) => {
  const adts = aacAdts(dir, sine(440, 16000, 2, 8000).map((v, i) => v + (i % 3)), 16000);
  const clean = await drive(pool.open({ sessionId: 'aac-clean', codec: 'aac', sampleRate: 16000, channels: 1 }), adts);
  const stream = pool.open({ sessionId: 'aac-not-adts', codec: 'aac', sampleRate: 16000, channels: 1 });
  const out = await drive(stream, [...adts.slice(0, 10), garbage(200, 4), ...adts.slice(10)], 3);
  t.equal(stream.stats.corruptFrames, 1);
  t.equal(stream.stats.frames, adts.length);
  t.same(out, clean, 'sample for sample');
});

t.test('aac: a frame that does not decode is counted and stands as its length of silence; the stream goes on', async (t) => {
  const adts = aacAdts(dir, sine(440, 16000, 2, 8000), 16000);
  const clean = (await drive(pool.open({ sessionId: 'aac-clean-2', codec: 'aac', sampleRate: 16000, channels: 1 }), adts))[0]!;
  // Frame 10 keeps its header (so its length is known) but its payload is zeros, which the decoder refuses.
  const broken = adts.map((f, i) => (i === 10 ? f.map((v, k) => (k < 7 ? v : 0)) : f));
  const stream = pool.open({ sessionId: 'aac-bad-payload', codec: 'aac', sampleRate: 16000, channels: 1 });
  const out = (await drive(stream, broken, 4))[0]!;
  t.equal(stream.stats.corruptFrames, 1);
  t.equal(out.length, clean.length, 'the timeline keeps its length');
  t.ok(out.subarray(10 * 1024, 11 * 1024).every((v) => v === 0), 'the lost frame is silence');
  // MDCT frames overlap by one: from the second frame after the loss the output is the clean stream's again.
  t.same(out.subarray(12 * 1024), clean.subarray(12 * 1024), 'decoding resumes exactly');
  t.ok(Math.abs(tone(out.subarray(24000, 27200), 16000).hz - 440) < 10, 'the tone after the loss');
});

t.test('aac: a stereo stream is mixed down to mono', async (t) => {
  const left = sine(440, 48000, 1, 8000);
  const adts = aacAdts(dir, left, 48000, 2);
  const out = await drive(pool.open({ sessionId: 'aac-stereo', codec: 'aac', sampleRate: 48000, channels: 1 }), adts, 5);
  t.equal(out.length, 1, 'one channel out');
  const seconds = out[0]!.length / 16000;
  t.ok(Math.abs(seconds - 1) < 0.1, `${seconds.toFixed(3)} s`);
  const mid = out[0]!.subarray(4000, 12000);
  t.ok(Math.abs(tone(mid, 16000).hz - 440) < 10, 'the tone');
  const peak = mid.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  t.ok(peak > 6000 && peak < 10000, `both channels carry the tone, so the mix keeps its level (peak ${peak})`);
});

t.test('two channels come out apart, each 16 kHz mono', async (t) => {
  const enc1 = new OpusEncoderStream(16000);
  const enc2 = new OpusEncoderStream(16000);
  const a = frames(sine(300, 16000, 1, 8000), 320).map((f) => onChannel(1, enc1.encode(f)));
  const b = frames(sine(1200, 16000, 1, 8000), 320).map((f) => onChannel(2, enc2.encode(f)));
  const messages = a.flatMap((m, i) => [m, b[i]!]);
  messages.push(new Uint8Array([0x03, 1, 2, 3])); // unknown channel id
  const stream = pool.open({ sessionId: 'stereo', codec: 'opus_fs320', sampleRate: 16000, channels: 2 });
  const out = await drive(stream, messages, 6);
  t.equal(out.length, 2);
  t.equal(out[0]!.length, 16000);
  t.equal(out[1]!.length, 16000);
  t.ok(Math.abs(tone(out[0]!.subarray(1600), 16000).hz - 300) < 10, 'channel 1 is the 300 Hz tone');
  t.ok(Math.abs(tone(out[1]!.subarray(1600), 16000).hz - 1200) < 15, 'channel 2 is the 1200 Hz tone');
  t.equal(stream.stats.corruptFrames, 1, 'the unknown channel id is counted');
});

t.test('two-channel pcm8 resamples each channel on its own', async (t) => {
  const pcm = speech(dir, 8000).subarray(0, 8000);
  const messages: Uint8Array[] = [];
  for (let i = 0; i < pcm.length; i += 80) {
    const chunk = new Uint8Array(pcm.slice(i, i + 80).buffer);
    messages.push(onChannel(1, chunk), onChannel(2, new Uint8Array(chunk.length)));
  }
  const stream = pool.open({ sessionId: 'stereo-pcm8', codec: 'pcm8', sampleRate: 8000, channels: 2 });
  const out = await drive(stream, messages);
  t.equal(out[0]!.length, 16000);
  t.equal(out[1]!.length, 16000);
  t.ok(out[0]!.some((v) => v !== 0));
  t.ok(out[1]!.every((v) => v === 0), 'channel 2 stays silent');
});

t.test('a crashed codec thread is replaced and its sessions keep producing PCM', async (t) => {
  const local = new CodecPool({ threads: 1, filename: CRASH_WORKER });
  t.teardown(() => local.close());
  const enc = new OpusEncoderStream(16000);
  const packets = frames(sine(440, 16000, 2, 8000), 160).map((f) => enc.encode(f));
  const stream = local.open({ sessionId: 'crash', codec: 'opus', sampleRate: 16000, channels: 1 });
  const lc3 = local.open({ sessionId: 'crash-lc3', codec: 'lc3_fs1030', sampleRate: 16000, channels: 1 });
  const crasher = local.open({ sessionId: 'crasher', codec: 'pcm16', sampleRate: 16000, channels: 1 });
  await Promise.all([stream.ready, lc3.ready, crasher.ready]);
  let samples = 0;
  let recreated = false;
  const failures: string[] = [];
  stream.on('pcm', (pcm, info) => {
    samples += pcm[0]!.length;
    recreated ||= info.recreated;
  });
  stream.on('failure', (err) => failures.push(err.code));
  for (let i = 0; i < 100; i++) {
    stream.push(packets[i]!);
    await new Promise((r) => setImmediate(r));
  }
  await crashShardOf(crasher);
  for (let i = 100; i < 200; i++) stream.push(packets[i]!);
  await stream.close();
  t.ok(recreated, 'the decoder was re-created in the new thread');
  t.ok(samples >= (200 - stream.stats.lostMessages) * 160, `samples ${samples}, lost ${stream.stats.lostMessages}`);
  t.ok(samples > 100 * 160, 'PCM kept coming after the crash');
  t.ok(failures.every((c) => c === 'ENG_ERR_CODEC_FAILED'));
  // The idle session on the same shard works too.
  const lc3Frames = frames(sine(440, 16000, 0.2, 8000), 160).map((f) => new Lc3Encoder(10000, 16000).encode(f, 30));
  const out = await drive(lc3, lc3Frames);
  t.equal(out[0]!.length > 0, true);
  t.equal(lc3.stats.recreations, 1);
});

t.test('pushing after close fails with a code; closing the pool ends everything', async (t) => {
  const local = new CodecPool({ threads: 2, fillBusy: 0 });
  const s = local.open({ sessionId: 'closed', codec: 'aac', sampleRate: 16000, channels: 1 });
  await s.ready;
  const other = local.open({ sessionId: 'open', codec: 'pcm16', sampleRate: 16000, channels: 1 });
  t.same(local.load, [1, 1], 'sessions spread over the shards');
  await s.close();
  t.throws(() => s.push(new Uint8Array(10)), { code: 'ENG_ERR_CODEC_STREAM_CLOSED' });
  other.push(new Uint8Array(320));
  await local.close();
  let late: unknown;
  try {
    local.open({ sessionId: 'late', codec: 'pcm16', sampleRate: 16000, channels: 1 });
  } catch (err) {
    late = err;
  }
  t.ok(isEngineError(late), 'a closed pool refuses new streams');
});

t.test('tidyThreads() asks the threads whose streams closed since the last call, and they go on decoding', async (t) => {
  const own = new CodecPool({ threads: 2, fillBusy: 0 });
  t.teardown(() => own.close());
  t.equal(own.tidyThreads(), 0, 'no stream closed yet');
  const messages = pcmMessages(sine(440, 16000, 0.2, 3200), 320);
  const open = (sessionId: string) => own.open({ sessionId, codec: 'pcm16', sampleRate: 16000, channels: 1 });
  const a = open('tidy-a');
  const b = open('tidy-b');
  t.same(own.load, [1, 1], 'one stream per thread');
  await drive(a, messages, 2); // and closes it
  t.equal(own.tidyThreads(), 1, 'the thread where a stream closed');
  t.equal(own.tidyThreads(), 0, 'nothing closed since');
  t.equal((await drive(b, messages, 2))[0]!.length, 3200, 'the other thread decoded on');
  t.equal((await drive(open('tidy-c'), messages, 2))[0]!.length, 3200, 'a new stream decodes after the tidy');
  t.equal(own.tidyThreads(), 2, 'both threads saw a stream close since');
  t.equal((await own.threadHeaps()).length, 2, 'both still answer');
});

t.test('each shard thread reports its own V8 heap once a stream started it, a replaced one too, a closed pool none', async (t) => {
  const own = new CodecPool({ threads: 2, fillBusy: 0, filename: CRASH_WORKER });
  t.same(await own.threadHeaps(), [], 'no thread runs before the first stream');
  const streams = ['first', 'second'].map((sessionId) => own.open({ sessionId, codec: 'pcm16', sampleRate: 16000, channels: 1 }));
  await Promise.all(streams.map((s) => s.ready));
  const heaps = await own.threadHeaps();
  t.same(heaps.map((h) => h.shard), [0, 1]);
  for (const h of heaps) t.ok(h.usedBytes > 100_000 && h.committedBytes >= h.usedBytes, `shard ${h.shard}: ${h.usedBytes} used, ${h.committedBytes} committed`);
  await crashShardOf(streams.find((s) => s.shard === 1)!);
  t.same((await own.threadHeaps()).map((h) => h.shard), [0, 1], 'the thread that replaced a crashed one answers');
  await own.close();
  t.same(await own.threadHeaps(), []);
});
