// Sessions decoded on the main thread (CodecPoolOptions.inline): the same samples as on a shard, side by side with
// the shards' sessions in one pool, corrupt frames handled there too, and each session stays where it was opened.
import t from 'tap';
import { CodecPool, type Codec } from '../../../engine/codec/pool.js';
import { listenUrl } from '../../../engine/stt/provider-a/protocol.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';
import { aacAdts, concat, drive, elc3, frames, pcmMessages, sine, speech, tone } from '../../helpers/codec-fixtures.js';

const dir = t.testdir();
const fake = await startFakeDeepgram({ sweepEveryMs: 0 });
t.teardown(() => fake.close());
const threads = new CodecPool({ threads: 1 });
const main = new CodecPool({ threads: 1, inline: () => true });
t.teardown(async () => {
  await threads.close();
  await main.close();
});

function opus(rate: number, start = 0): Uint8Array[] {
  const pcm = speech(dir, rate);
  const enc = new OpusEncoderStream(rate);
  return frames(pcm.subarray(start), rate / 50).map((f) => enc.encode(f));
}

const cases: { codec: Codec; rate: number; messages: () => Uint8Array[] }[] = [
  { codec: 'opus_fs320', rate: 16000, messages: () => opus(16000) },
  { codec: 'lc3_fs1030', rate: 16000, messages: () => elc3(dir, speech(dir, 16000), 16000, 24000).frames },
  { codec: 'aac', rate: 48000, messages: () => aacAdts(dir, speech(dir, 48000), 48000) },
  { codec: 'pcm8', rate: 8000, messages: () => pcmMessages(speech(dir, 8000), 80) },
];

for (const c of cases) {
  t.test(`${c.codec} at ${c.rate} Hz on the main thread: the samples a shard gives`, async (t) => {
    const messages = c.messages();
    const onShard = threads.open({ sessionId: `shard-${c.codec}`, codec: c.codec, sampleRate: c.rate, channels: 1 });
    const onMain = main.open({ sessionId: `main-${c.codec}`, codec: c.codec, sampleRate: c.rate, channels: 1 });
    t.equal(onShard.inline, false);
    t.equal(onMain.inline, true);
    t.same(main.load, [0], 'no session on the pool’s thread');
    t.equal(main.inlineLoad, 1);
    const [a, b] = await Promise.all([drive(onShard, messages, 5), drive(onMain, messages, 5)]);
    t.ok(b[0]!.length > 16000, `${b[0]!.length} samples`);
    t.same(b, a);
    t.ok(onMain.stats.tasks > 1, 'in several tasks');
    t.equal(main.inlineLoad, 0, 'closed streams leave');
  });
}

t.test('the pool asks at each open with the sessions open; each session stays where it was put', async (t) => {
  const asked: number[] = [];
  let yes = true;
  const pool = new CodecPool({ threads: 2, fillBusy: 0, inline: (sessions) => (asked.push(sessions), yes) });
  t.teardown(() => pool.close());
  const inputs = [0, 1, 2, 3, 4].map((i) => opus(16000, i * 4000));
  const streams = inputs.map((_, i) => {
    yes = i % 2 === 0;
    return pool.open({ sessionId: `mixed-${i}`, codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  });
  t.same(asked, [0, 1, 2, 3, 4]);
  t.same(streams.map((s) => s.inline), [true, false, true, false, true]);
  t.same(pool.load, [1, 1]);
  t.equal(pool.inlineLoad, 3);
  // Fed together, message by message: each stream gets its own samples (main-thread streams share one scratch area
  // and one answer buffer per task, as a shard's do).
  const out = streams.map(() => [] as Int16Array[]);
  streams.forEach((s, i) => s.on('pcm', (pcm) => out[i]!.push(pcm[0]!.slice())));
  const longest = Math.max(...inputs.map((m) => m.length));
  for (let m = 0; m < longest; m++) {
    inputs.forEach((messages, i) => messages[m] && streams[i]!.push(messages[m]!));
    if (m % 3 === 2) await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(streams.map((s) => s.close()));
  for (let i = 0; i < streams.length; i++) {
    const alone = await drive(threads.open({ sessionId: `alone-${i}`, codec: 'opus_fs320', sampleRate: 16000, channels: 1 }), inputs[i]!);
    t.same(concat(out[i]!), alone[0], `stream ${i}`);
  }
  t.same((await pool.threadHeaps()).map((h) => h.shard), [0, 1], 'heaps are the threads’; the main thread’s is in nodejs_heap_*');
});

t.test('corrupt packets on the main thread are counted and concealed, and the session goes on', async (t) => {
  const enc = new OpusEncoderStream(16000);
  const messages = frames(sine(440, 16000, 1, 8000), 320).map((f) => enc.encode(f));
  messages.splice(20, 0, new Uint8Array(40).map((_, i) => (i * 37 + 101) & 0xff));
  const stream = main.open({ sessionId: 'main-corrupt', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  const out = await drive(stream, messages, 4);
  t.equal(stream.stats.corruptFrames, 1);
  t.equal(out[0]!.length, 51 * 320, '50 good frames and one concealed');
  t.ok(Math.abs(tone(out[0]!.subarray(16000 - 3200), 16000).hz - 440) < 10, 'still the tone after it');
});

t.test('close without flush drops what is staged; a closed pool refuses more', async (t) => {
  const pool = new CodecPool({ threads: 1, inline: () => true, maxHoldMs: 3_600_000 });
  const stream = pool.open({ sessionId: 'main-drop', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  await stream.ready;
  let pcm = 0;
  stream.on('pcm', () => pcm++);
  // A provider socket on the main thread whose plan holds audio back for longer than the test runs.
  const socket = stream.socket(0);
  socket.listen({ text: () => undefined, close: () => undefined, stuck: () => undefined });
  const url = listenUrl(fake.url, 'nova-3', 'en', []);
  t.same(await socket.open({ url, headers: { Authorization: 'Token test-key' }, maxPayload: 1 << 20, maxBufferedBytes: 1 << 20 }, { messageSamples: 1_000_000, firstSamples: 1_000_000, minSamples: 320 }), { ok: true });
  for (const m of opus(16000).slice(0, 10)) stream.push(m);
  t.equal(stream.pendingBytes > 0, true, 'held back');
  await stream.close({ flush: false });
  t.equal(pcm, 0, 'nothing decoded');
  t.equal(pool.inlineLoad, 0);
  await pool.close();
  t.throws(() => pool.open({ sessionId: 'late', codec: 'pcm16', sampleRate: 16000, channels: 1 }), { code: 'ENG_ERR_CODEC_STREAM_CLOSED' });
});

t.test('two pools of one process decode on the main thread side by side, each stream its own samples', async (t) => {
  // The main thread's decoders are one map for the process (workers/decode.ts imported once): streams of two pools
  // must not share an entry.
  const a = new CodecPool({ threads: 1, inline: () => true });
  const b = new CodecPool({ threads: 1, inline: () => true });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const inputs = [opus(16000, 0), opus(24000, 9000)];
  const rates = [16000, 24000];
  const streams = [a, b].map((p, i) => p.open({ sessionId: `two-${i}`, codec: 'opus_fs320', sampleRate: rates[i]!, channels: 1 }));
  const got = await Promise.all(streams.map((s, i) => drive(s, inputs[i]!, 5)));
  for (let i = 0; i < 2; i++) {
    const alone = await drive(threads.open({ sessionId: `two-alone-${i}`, codec: 'opus_fs320', sampleRate: rates[i]!, channels: 1 }), inputs[i]!);
    t.same(got[i], alone, `pool ${i}`);
  }
});
